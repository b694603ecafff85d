package embedded

// Base is embedded; its fields are promoted in JSON and it is one nested
// field in the binary encoding.
type Base struct {
	ID   int64 `json:"id"`
	Name string
}

// Audit is embedded too, with a field hidden by the outer struct.
type Audit struct {
	Name    string
	Version int
}

//streamgen:record
type Doc struct {
	Base
	Audit
	Body  string `json:"body"`
	Extra struct {
		Note string `json:"note,omitempty"`
	}
}

//streamgen:record
type Batch struct {
	Docs []Doc
	ByID map[int64]*Doc
}
