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

// RequiredNotInJSON marks as required fields that no JSON member reads.
// Its key is not in the JSON either, which is no error: it is just not
// required there.
//
//streamgen:record
type RequiredNotInJSON struct {
	Hidden   string `json:"-" stream:"required"`
	private  string `stream:"required"`
	Promoted `stream:"required"`
	A        string `json:"same" stream:"required"`
	B        string `json:"same"`
	Key      string `json:"-" stream:"key"`
	Both     string `stream:"required,key,id=12"`
}

type Promoted struct{ P string }

//streamgen:record
type TooManyRequired struct {
	F00, F01, F02, F03, F04, F05, F06, F07, F08, F09, F10, F11, F12, F13, F14, F15, F16, F17, F18, F19, F20, F21, F22, F23, F24, F25, F26, F27, F28, F29, F30, F31, F32, F33, F34, F35, F36, F37, F38, F39, F40, F41, F42, F43, F44, F45, F46, F47, F48, F49, F50, F51, F52, F53, F54, F55, F56, F57, F58, F59, F60, F61, F62, F63, F64 int `stream:"required"`
}

// RequiredOmitted asks MarshalJSON to leave out members that UnmarshalJSON
// requires. omitempty never leaves out a struct (At), so that one is no
// error.
//
//streamgen:record
type RequiredOmitted struct {
	ID    int64     `json:"id,omitempty" stream:"key"`
	At    time.Time `json:"at,omitempty" stream:"eventtime"`
	Since time.Time `json:"since,omitzero" stream:"required"`
	Name  string    `json:"name,omitempty" stream:"required"`
	Note  string    `json:"note,omitempty"`
}

// PromotedOmitted holds a required member promoted from a struct that
// asks to leave it out: the error is the declaring struct's.
//
//streamgen:record
type PromotedOmitted struct {
	OmittedInside
}

type OmittedInside struct {
	Tags []string `json:"tags,omitempty" stream:"required"`
}

// Stay embeds the record Place but is not one: Place's generated methods
// would be its, leaving out Nights.
type Stay struct {
	Place
	Nights int
}

//streamgen:record
type Place struct{ Name string }

//streamgen:record
type UsesStay struct{ S Stay }

// Visit takes MarshalJSON from the Opaque it embeds, which would leave out
// Minutes.
type Visit struct {
	Opaque
	Minutes int
}

//streamgen:record
type UsesVisit struct{ V Visit }

// Stamp is defined on time.Time: time's unexported fields, none of its
// methods.
type Stamp time.Time

//streamgen:record
type UsesStamp struct{ At Stamp }

// Wrapper embeds the record Place and nothing else: Place's methods
// encode it whole, as encoding/json would call them (not refused).
type Wrapper struct{ Place }

//streamgen:record
type UsesWrapper struct{ W Wrapper }
