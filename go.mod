module github.com/streamgen/streamgen

go 1.26.0

require golang.org/x/tools v0.52.0

require (
	github.com/dave/jennifer v1.7.1 // indirect
	github.com/philhofer/fwd v1.2.0 // indirect
	github.com/tinylib/msgp v1.6.5 // indirect
	golang.org/x/mod v0.42.0 // indirect
	golang.org/x/sync v0.24.0 // indirect
)
