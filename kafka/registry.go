package kafka

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"sync"

	"github.com/twmb/franz-go/pkg/sr"

	"github.com/streamgen/streamgen/codec"
	"github.com/streamgen/streamgen/typed"
)

// RegistryEnv is the environment variable RegistryURLs reads: a
// comma-separated list of schema registry URLs.
const RegistryEnv = "STREAMGEN_SCHEMA_REGISTRY"

// RegistryURLs returns the schema registry URLs listed in the environment
// variable STREAMGEN_SCHEMA_REGISTRY (comma-separated, blanks around each
// ignored), or nil when it is unset or lists none: a program then uses
// the registry of Embedded (SchemaRegistry). It is safe for concurrent use.
func RegistryURLs() []string { return envList(RegistryEnv) }

// confluentMagic is the first byte of Confluent's wire format.
const confluentMagic = 0

// ConfluentHeaderSize is the length of Confluent's wire-format header: a
// zero byte and the schema's id in the registry, 4 bytes big-endian.
const ConfluentHeaderSize = 5

// ErrNoConfluentHeader is wrapped by ConfluentPayload for a value that
// does not begin with Confluent's wire-format header.
var ErrNoConfluentHeader = errors.New("streamgen: kafka: not in Confluent's wire format (a zero byte and a 4-byte schema id before the payload)")

// ConfluentPayload splits a record value in Confluent's wire format into
// the id of its schema in the registry and its payload (JSON, for the
// JSON Schema format). The payload shares value's memory. A value of
// fewer than 5 bytes, or whose first is not 0, gives an error wrapping
// ErrNoConfluentHeader.
func ConfluentPayload(value []byte) (schemaID uint32, payload []byte, err error) {
	if len(value) < ConfluentHeaderSize || value[0] != confluentMagic {
		n := min(len(value), ConfluentHeaderSize)
		return 0, nil, fmt.Errorf("%w: it begins % x", ErrNoConfluentHeader, value[:n])
	}
	return binary.BigEndian.Uint32(value[1:5]), value[ConfluentHeaderSize:], nil
}

// AppendConfluentHeader appends Confluent's wire-format header for the
// schema schemaID to b.
func AppendConfluentHeader(b []byte, schemaID uint32) []byte {
	return binary.BigEndian.AppendUint32(append(b, confluentMagic), schemaID)
}

// FromConfluentJSON reads rows of type T from src, whose record values
// are in Confluent's wire format with a JSON payload, as the JSON Schema
// serializers of Confluent's clients (and Sink's ConfluentJSON format)
// write them: the header is checked and skipped, and the payload decoded
// with T's generated decoder. The schema id is not looked up: the JSON
// is read as T's, members T does not have are skipped. A value without
// the header, or whose JSON does not decode, goes to the query's
// dead-letter sink with its position and the error, as with typed.From.
func FromConfluentJSON[T any, P codec.RecordPtr[T]](src *TopicSource) typed.Stream[T] {
	return From(src, func(m *Message) (T, error) {
		var t T
		_, payload, err := ConfluentPayload(m.Value)
		if err != nil {
			return t, fmt.Errorf("FromConfluentJSON: %w", err)
		}
		if err := P(&t).UnmarshalJSON(payload); err != nil {
			// Its offsets count from the payload, not the value.
			return t, fmt.Errorf("FromConfluentJSON: the JSON after the %d-byte header: %w", ConfluentHeaderSize, err)
		}
		return t, nil
	})
}

// schemaIDs registers (or looks up) a row type's schema in a registry,
// once for each subject, and keeps the ids. It is safe for concurrent
// use.
type schemaIDs struct {
	registry *sr.Client
	schema   sr.Schema
	subject  func(topic string) string
	lookUp   bool

	mu  sync.Mutex
	ids map[string]uint32 // by topic
}

// of returns the id of the schema for records of topic, registering it
// under the topic's subject at its first record.
func (s *schemaIDs) of(ctx context.Context, topic string) (uint32, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if id, ok := s.ids[topic]; ok {
		return id, nil
	}
	subject := topic + "-value"
	if s.subject != nil {
		subject = s.subject(topic)
	}
	var id int
	var err error
	if s.lookUp {
		var ss sr.SubjectSchema
		ss, err = s.registry.LookupSchema(ctx, subject, s.schema)
		id = ss.ID
	} else {
		id, err = s.registry.RegisterSchema(ctx, subject, s.schema, -1, -1)
	}
	switch {
	case err != nil && s.lookUp:
		return 0, fmt.Errorf("schema registry: look up the row type's JSON Schema in subject %q: %w", subject, err)
	case err != nil:
		return 0, fmt.Errorf("schema registry: register the row type's JSON Schema in subject %q: %w", subject, err)
	case id < 0 || id > math.MaxInt32:
		return 0, fmt.Errorf("schema registry: subject %q: the registry gave the schema id %d, which Confluent's header cannot carry (a signed 32-bit id)", subject, id)
	}
	if s.ids == nil {
		s.ids = map[string]uint32{}
	}
	s.ids[topic] = uint32(id)
	return uint32(id), nil
}
