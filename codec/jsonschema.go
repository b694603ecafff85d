package codec

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
)

// JoinJSONSchemas is how generated code builds the JSON Schema of a record
// that holds records of other packages: root is the schema of the
// record's own types, which refers to each record of another package as
// "#/definitions/" followed by its qualified name ("example.com/geo.Point",
// with "/" written "~1", and percent-encoded as a URI's fragment);
// others maps each such name to that record's
// StreamJSONSchema. Each is added to root's definitions under its name,
// with the definitions it has itself. It panics on a schema that is not a
// JSON object, which generated code never passes.
func JoinJSONSchemas(root string, others map[string]string) string {
	members, err := jsonMembers(root)
	if err != nil {
		panic(fmt.Errorf("streamgen: JoinJSONSchemas: root: %w", err))
	}
	defs := map[string]json.RawMessage{}
	at := -1
	for i, m := range members {
		if m.key == "definitions" {
			at = i
			if err := json.Unmarshal(m.value, &defs); err != nil {
				panic(fmt.Errorf("streamgen: JoinJSONSchemas: root's definitions: %w", err))
			}
		}
	}
	for _, name := range slices.Sorted(maps.Keys(others)) {
		other, err := jsonMembers(others[name])
		if err != nil {
			panic(fmt.Errorf("streamgen: JoinJSONSchemas: %s: %w", name, err))
		}
		var own []jsonMember
		for _, m := range other {
			switch m.key {
			case "definitions":
				var more map[string]json.RawMessage
				if err := json.Unmarshal(m.value, &more); err != nil {
					panic(fmt.Errorf("streamgen: JoinJSONSchemas: %s's definitions: %w", name, err))
				}
				for k, v := range more {
					if _, ok := defs[k]; !ok {
						defs[k] = v
					}
				}
			case "$schema", "title":
			default:
				own = append(own, m)
			}
		}
		if _, ok := defs[name]; !ok {
			defs[name] = writeMembers(own)
		}
	}
	all, err := json.Marshal(defs)
	if err != nil {
		panic(fmt.Errorf("streamgen: JoinJSONSchemas: definitions: %w", err))
	}
	if at < 0 {
		members = append(members, jsonMember{key: "definitions"})
		at = len(members) - 1
	}
	members[at].value = all
	return string(writeMembers(members))
}

// JSONSchemaProperties returns the names of the members a record's JSON
// may have, in the order its AppendJSON writes them: the properties of
// the root of its StreamJSONSchema. It is safe for concurrent use.
func JSONSchemaProperties(schema string) ([]string, error) {
	members, err := jsonMembers(schema)
	if err != nil {
		return nil, fmt.Errorf("streamgen: JSON schema: %w", err)
	}
	for _, m := range members {
		if m.key != "properties" {
			continue
		}
		props, err := jsonMembers(string(m.value))
		if err != nil {
			return nil, fmt.Errorf("streamgen: JSON schema's properties: %w", err)
		}
		names := make([]string, len(props))
		for i, p := range props {
			names[i] = p.key
		}
		return names, nil
	}
	return nil, fmt.Errorf("streamgen: JSON schema: the root has no properties")
}

// writeMembers writes members as a JSON object, in their order.
func writeMembers(members []jsonMember) []byte {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, m := range members {
		if i > 0 {
			b.WriteByte(',')
		}
		key, _ := json.Marshal(m.key)
		b.Write(key)
		b.WriteByte(':')
		b.Write(m.value)
	}
	b.WriteByte('}')
	return b.Bytes()
}

type jsonMember struct {
	key   string
	value json.RawMessage
}

// jsonMembers returns the members of the JSON object text, in order.
func jsonMembers(text string) ([]jsonMember, error) {
	dec := json.NewDecoder(strings.NewReader(text))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil, fmt.Errorf("not a JSON object")
	}
	var members []jsonMember
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return nil, err
		}
		var m jsonMember
		m.key, _ = t.(string)
		if err := dec.Decode(&m.value); err != nil {
			return nil, err
		}
		members = append(members, m)
	}
	if _, err := dec.Token(); err != nil {
		return nil, err
	}
	return members, nil
}
