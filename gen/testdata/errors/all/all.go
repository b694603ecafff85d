package all

import "time"

//streamgen:record
type Chan struct {
	C chan int
}

//streamgen:record
type Func struct {
	F func()
}

//streamgen:record
type Iface struct {
	V any
}

//streamgen:record
type Generic[T any] struct {
	V T
}

type Box[T any] struct{ V T }

//streamgen:record
type UsesGeneric struct {
	B Box[int]
}

//streamgen:record name=x
type BadKey struct{}

//streamgen:recrod
type Typo struct{}

//streamgen:record
type NotStruct int

//streamgen:record
type DupID struct {
	A int `stream:"id=9"`
	B int `stream:"id=9"`
}

//streamgen:record
type BadTag struct {
	A int `stream:"idx"`
}

//streamgen:record
type BadID struct {
	A int `stream:"id=0"`
}

//streamgen:record
type EmbeddedPtr struct {
	*time.Time
}

type Key struct{ A int }

//streamgen:record
type StructKey struct {
	M map[Key]int
}

//streamgen:record
type StringOpt struct {
	N Custom `json:",string"`
}

type Custom int

func (Custom) MarshalText() ([]byte, error) { return nil, nil }

type PtrText struct{ n int }

func (*PtrText) MarshalText() ([]byte, error) { return nil, nil }
func (*PtrText) UnmarshalText([]byte) error   { return nil }

type WrapPtr struct{ P PtrText }

type Opaque struct{ n int }

func (Opaque) MarshalJSON() ([]byte, error) { return nil, nil }

type Grade byte

func (Grade) MarshalText() ([]byte, error) { return nil, nil }

//streamgen:record
type HasCustom struct {
	Custom
	Keys  map[Custom]int
	Vals  map[string]PtrText
	Arrs  map[string][2]PtrText
	Wrap  map[string]WrapPtr
	PtrOK map[string]*PtrText
	PKeys map[*Custom]int
	O     Opaque
	G     []Grade
}

//streamgen:record
type Complex struct {
	Z complex128
	P uintptr
}

//streamgen:record
type BadEventTime struct {
	At string `stream:"eventtime"`
}

type Loose struct{}

//streamgen:record
func notAType() {}

var _ = Loose{}
