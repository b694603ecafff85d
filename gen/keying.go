package gen

import (
	"go/ast"
	"go/token"
	"go/types"
	"path/filepath"
	"time"
)

// Keying is how a binding (of a function or of a processor type) prepares
// its input for a keyed operator: a watermark Delay behind the Event field
// when HasDelay, then a grouping by the Key field.
type Keying struct {
	Key      *types.Var // the field of the input that is the key
	Event    *types.Var // the field of the input that is the event time, with a watermark
	Unit     string     // Event's unit (ns, us, ms or s) when it is an integer, from its stream tag
	Delay    time.Duration
	HasDelay bool
}

// clock is what the timeout= key of the groups bindings and the time= key
// of //streamgen:processor name: the time the operator's timers run on.
type clock int

const (
	noClock         clock = iota // none, the default
	processingClock              // processing
	eventClock                   // event: needs watermark=
)

// keying reads the keys key=, watermark= and eventtime= of d, on the
// declaration named decl whose input is in and whose key is of type key.
// needsWatermark is the key=value of d that a watermark must come with
// (timeout=event), or "".
func (b *builder) keying(d directive, decl *ast.Ident, in, key types.Type, needsWatermark string) (Keying, bool) {
	var k Keying
	st, ok := in.Underlying().(*types.Struct)
	if !ok {
		b.rep.errorf(decl.Pos(), "//streamgen:%s on %s: the input type %s is not a struct, so it has no key field", d.Name, decl.Name, typeString(b.pkg, in))
		return k, false
	}
	if k.Key, _, ok = b.taggedField(st, d, "key", func(t streamTag) bool { return t.key }); !ok {
		return k, false
	}
	if !types.Identical(k.Key.Type(), key) {
		b.rep.errorf(decl.Pos(), "//streamgen:%s on %s: the key parameter is %s but the key field %s is %s", d.Name, decl.Name,
			typeString(b.pkg, key), k.Key.Name(), typeString(b.pkg, k.Key.Type()))
		return k, false
	}
	if v, ok := d.Args["watermark"]; ok {
		delay, err := time.ParseDuration(v)
		if err != nil || delay < 0 {
			b.rep.errorf(d.Pos, "//streamgen:%s: watermark=%s: want a duration such as 5s", d.Name, v)
			return k, false
		}
		ev, tag, ok := b.taggedField(st, d, "eventtime", func(t streamTag) bool { return t.eventTime })
		if !ok {
			return k, false
		}
		switch {
		case isNamed(ev.Type(), "time", "Time"):
		case !isInteger(ev.Type()):
			b.rep.errorf(d.Pos, "//streamgen:%s: the event-time field %s must be a time.Time or an integer with its unit (`stream:\"eventtime,unit=ms\"`)", d.Name, ev.Name())
			return k, false
		case tag.unit == "":
			b.rep.errorf(d.Pos, "//streamgen:%s: the event-time field %s is an integer without a unit: tag it `stream:\"unit=ms\"` (ns, us, ms or s since the Unix epoch)", d.Name, ev.Name())
			return k, false
		}
		k.Event, k.Unit, k.Delay, k.HasDelay = ev, tag.unit, delay, true
	}
	if needsWatermark != "" && !k.HasDelay {
		b.rep.errorf(d.Pos, "//streamgen:%s: %s needs watermark=DURATION", d.Name, needsWatermark)
		return k, false
	}
	return k, true
}

// taggedField finds the field of st named by the directive's key (as in
// key=Field), or else the one tagged `stream:"<what>"`, and its stream
// tag.
func (b *builder) taggedField(st *types.Struct, d directive, what string, tagged func(streamTag) bool) (*types.Var, streamTag, bool) {
	if name, ok := d.Args[what]; ok {
		for i := 0; i < st.NumFields(); i++ {
			if f := st.Field(i); f.Name() == name && f.Exported() {
				t, _ := parseStreamTag(st.Tag(i)) // a bad tag is reported with the record
				return f, t, true
			}
		}
		b.rep.errorf(d.Pos, "//streamgen:%s: %s=%s: the input has no exported field %s", d.Name, what, name, name)
		return nil, streamTag{}, false
	}
	var found *types.Var
	var foundTag streamTag
	for i := 0; i < st.NumFields(); i++ {
		t, err := parseStreamTag(st.Tag(i))
		if err == nil && tagged(t) {
			if found != nil {
				b.rep.errorf(d.Pos, "//streamgen:%s: the input has two fields tagged stream:%q (%s and %s); choose one with %s=Field", d.Name, what, found.Name(), st.Field(i).Name(), what)
				return nil, streamTag{}, false
			}
			found, foundTag = st.Field(i), t
		}
	}
	if found == nil {
		b.rep.errorf(d.Pos, "//streamgen:%s: the input has no field tagged `stream:%q`; tag one or name it with %s=Field", d.Name, what, what)
		return nil, streamTag{}, false
	}
	return found, foundTag, true
}

// bindingKeys are what the keys that every binding directive takes say.
type bindingKeys struct {
	name   string // name=, by default the declaration's name + "Stream"
	clock  clock  // timeout= or time=
	mode   string // mode=: the typed.OutputMode, Append (the default) or Update
	Keying        // key=, watermark=, eventtime=
}

// bindingKeys reads the keys of d, on the declaration named decl whose
// input is in and whose key is of type key; clockKey is the key that
// names the clock (timeout or time).
func (b *builder) bindingKeys(d directive, clockKey string, decl *ast.Ident, in, key types.Type) (bindingKeys, bool) {
	k := bindingKeys{name: decl.Name + "Stream", mode: "Append"}
	if v, ok := d.Args["name"]; ok {
		if !token.IsIdentifier(v) {
			b.rep.errorf(d.Pos, "//streamgen:%s: name=%q is not an identifier", d.Name, v)
			return k, false
		}
		k.name = v
	}
	switch v := d.Args[clockKey]; v {
	case "", "none":
	case "processing":
		k.clock = processingClock
	case "event":
		k.clock = eventClock
	default:
		b.rep.errorf(d.Pos, "//streamgen:%s: %s=%s: want none, processing or event", d.Name, clockKey, v)
		return k, false
	}
	switch v := d.Args["mode"]; v {
	case "", "append":
	case "update":
		k.mode = "Update"
	default:
		b.rep.errorf(d.Pos, "//streamgen:%s: mode=%s: want append or update", d.Name, v)
		return k, false
	}
	needsWatermark := ""
	if k.clock == eventClock {
		needsWatermark = clockKey + "=event"
	}
	var ok bool
	k.Keying, ok = b.keying(d, decl, in, key, needsWatermark)
	if !ok {
		return k, false
	}
	for _, name := range bindingNames(k.name, k.HasDelay) {
		if obj := b.pkg.Scope().Lookup(name); obj != nil {
			pos := b.rep.fset.Position(obj.Pos())
			b.rep.errorf(decl.Pos(), "//streamgen:%s on %s: the generator writes %s, which the package declares already (%s:%d); rename that, or give the generated function another name with name=NAME", d.Name, decl.Name, name, filepath.Base(pos.Filename), pos.Line)
			ok = false
		} else if b.generated[name] {
			b.rep.errorf(decl.Pos(), "//streamgen:%s on %s: the generator writes %s for another directive or struct too; give the generated function another name with name=NAME", d.Name, decl.Name, name)
			ok = false
		}
		b.generated[name] = true
	}
	return k, ok
}

// bindingNames are the package-level names the output declares for the
// binding or processor function name: the function, and with a
// watermark its LateRows option.
func bindingNames(name string, hasDelay bool) []string {
	if hasDelay {
		return []string{name, name + "LateRows"}
	}
	return []string{name}
}

// typeArg returns the type argument of t when t is pkg.name[X].
func typeArg(t types.Type, pkg, name string) (types.Type, bool) {
	n, ok := types.Unalias(t).(*types.Named)
	if !ok || n.Obj().Pkg() == nil || n.Obj().Pkg().Path() != pkg || n.Obj().Name() != name || n.TypeArgs().Len() != 1 {
		return nil, false
	}
	return n.TypeArgs().At(0), true
}

func isInteger(t types.Type) bool {
	b, ok := t.Underlying().(*types.Basic)
	return ok && b.Info()&types.IsInteger != 0
}
