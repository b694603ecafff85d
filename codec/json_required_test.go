package codec

import (
	"errors"
	"strconv"
	"testing"
)

// readRequired reads doc as generated code reads an object whose members
// "a" and "b" are required and "c" is not, with r.Int for each value.
func readRequired(doc string) error {
	fields := &RequiredFields{Type: "pkg.T", Fields: []RequiredField{{Name: "a", Role: "the record's key"}, {Name: "b"}}}
	var r JSONReader
	r.Reset([]byte(doc))
	if r.BeginRequired("Go value of type pkg.T", fields) {
		var seen RequiredSet
		for {
			key, ok := r.NextKey()
			if !ok {
				seen.End(&r, fields)
				break
			}
			switch string(key) {
			case "a":
				seen.Mark(&r, 1<<0)
			case "b":
				seen.Mark(&r, 1<<1)
			}
			r.Int("Go value of type int", 64)
		}
	}
	return r.Finish()
}

func TestRequiredFields(t *testing.T) {
	for _, c := range []struct{ doc, err string }{
		{`{"a":1,"b":2}`, ""},
		{` { "b" : 0 , "c":null, "a" : 0 } `, ""},
		{`{"a":null,"b":2,"a":1}`, ""},
		{`{"a":1,"b":2,"b":null}`, `streamgen: pkg.T: required field "b" is null (offset 22)`},
		{`{"a":1,"b": null }`, `streamgen: pkg.T: required field "b" is null (offset 18)`},
		{`{"b":2}`, `streamgen: pkg.T: required field "a" (the record's key) is missing (offset 7)`},
		{`{"b":null}`, `streamgen: pkg.T: required field "a" (the record's key) is missing (offset 10)`},
		{`{}`, `streamgen: pkg.T: required field "a" (the record's key) is missing (offset 2)`},
		{` null`, `streamgen: pkg.T: required field "a" (the record's key) is missing: the value is null (offset 5)`},
		// Any other error comes first.
		{`{"a":"x"}`, `json: cannot unmarshal string into Go value of type int (offset 8)`},
		{`[]`, `json: cannot unmarshal array into Go value of type pkg.T (offset 1)`},
		{`{"b":2} x`, `json: invalid character 'x' after top-level value (offset 9)`},
		{`{"b":nul}`, `json: invalid character '}' in literal null (expecting 'l') (offset 9)`},
		{`nul`, `json: invalid character ' ' in literal null (expecting 'l') (offset 3)`},
		{`{"b":2`, `json: unexpected end of JSON input (offset 6)`},
	} {
		err := readRequired(c.doc)
		got := ""
		if err != nil {
			got = err.Error()
		}
		if got != c.err {
			t.Errorf("%s:\n got %s\nwant %s", c.doc, got, c.err)
		}
		var req *RequiredFieldError
		if errors.As(err, &req) != errors.Is(err, ErrRequired) {
			t.Errorf("%s: errors.As and errors.Is disagree on %v", c.doc, err)
		}
	}
}

// TestRequiredSetWidth: a RequiredSet counts 64 fields.
func TestRequiredSetWidth(t *testing.T) {
	fields := &RequiredFields{Type: "pkg.Wide"}
	for i := range 64 {
		fields.Fields = append(fields.Fields, RequiredField{Name: "f" + strconv.Itoa(i)})
	}
	for _, missing := range []int{-1, 0, 31, 63} {
		var r JSONReader
		r.Reset([]byte(`{}`))
		r.BeginRequired("", fields)
		r.NextKey()
		var seen RequiredSet
		for i := range 64 {
			if i != missing {
				seen.Mark(&r, 1<<i)
			}
		}
		seen.End(&r, fields)
		err := r.Err()
		var req *RequiredFieldError
		switch {
		case missing < 0 && err != nil:
			t.Errorf("all present: %v", err)
		case missing >= 0 && (!errors.As(err, &req) || req.Field != "f"+strconv.Itoa(missing)):
			t.Errorf("f%d missing: %v", missing, err)
		}
	}
}
