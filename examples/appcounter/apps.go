package main

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"strconv"
	"strings"

	"github.com/streamgen/streamgen/kafka"
	"github.com/streamgen/streamgen/typed"
)

//go:generate go run github.com/streamgen/streamgen/cmd/streamgen

// Message is the value of an InputsTopic record, JSON: a customer's
// purchase request ("<product> <quantity>" in Content) or question.
//
//streamgen:record
type Message struct {
	ID      int64  `json:"id"`
	Name    string `json:"name"`
	Subject string `json:"subject"`
	Content string `json:"content"`
}

// Request is a purchase request parsed from a Message, with the key of the
// Kafka record it came from: the counter is kept per key.
//
//streamgen:record
type Request struct {
	Key      string `json:"key" stream:"key"`
	ID       int64  `json:"id"`
	Name     string `json:"name"`
	Subject  string `json:"subject"`
	Product  string `json:"product"`
	Quantity int64  `json:"quantity"`
}

// App is an enriched request, the value written to CorpAppsTopic: the
// request and its number among its key's requests. Key is the record's
// key, not part of the value.
//
//streamgen:record
type App struct {
	Key        string `json:"-"`
	ID         int64  `json:"id"`
	Name       string `json:"name"`
	Subject    string `json:"subject"`
	Product    string `json:"product"`
	Quantity   int64  `json:"quantity"`
	AppCounter int64  `json:"app_counter"`
}

// errNotARequest is wrapped by parseRequest's error for a message that
// is not a purchase request.
var errNotARequest = errors.New("not a purchase request")

// parseRequest reads m as a purchase request: its content's last
// space-separated word is the quantity, an integer, and what comes before
// the last space is the product. Anything else is refused with an error
// saying why, and the message goes to the dead-letter topic.
func parseRequest(m *kafka.Message) (Request, error) {
	var msg Message
	if err := msg.UnmarshalJSON(m.Value); err != nil {
		return Request{}, fmt.Errorf("the value is not a message: %w", err)
	}
	cut := strings.LastIndexByte(msg.Content, ' ')
	if cut < 0 {
		return Request{}, fmt.Errorf("%w: content %q is not \"<product> <quantity>\"", errNotARequest, msg.Content)
	}
	product, word := msg.Content[:cut], msg.Content[cut+1:]
	quantity, err := strconv.ParseInt(word, 10, 64)
	if err != nil {
		return Request{}, fmt.Errorf("%w: content %q: its last word %q is not a quantity", errNotARequest, msg.Content, word)
	}
	return Request{Key: string(m.Key), ID: msg.ID, Name: msg.Name, Subject: msg.Subject,
		Product: product, Quantity: quantity}, nil
}

// counter numbers the requests of each key, as a Quix Streams count_apps:
// a value state holds how many requests the key has had, so that the
// numbering goes on from there when the query starts again on its
// checkpoint. A key's requests come in the order of their offsets (a key
// is in one partition), and each is emitted with its number (Append: a
// number, once given, is final). The processor keeps nothing of its own
// beyond the state variable, so handlers of different keys may run at
// once.
//
//streamgen:processor mode=append
type counter struct {
	count *typed.ValueState[int64]
}

func (p *counter) Init(h *typed.Handle) error {
	p.count = typed.NewValueState[int64](h, "app_counter")
	return nil
}

func (p *counter) HandleInputRows(ctx context.Context, key string, requests iter.Seq[Request], _ typed.TimerValues, emit func(App)) error {
	n, _, err := p.count.Get(ctx) // 0 for a key not seen before
	if err != nil {
		return err
	}
	for r := range requests {
		n++
		emit(App{Key: key, ID: r.ID, Name: r.Name, Subject: r.Subject, Product: r.Product, Quantity: r.Quantity, AppCounter: n})
	}
	return p.count.Update(ctx, n)
}
