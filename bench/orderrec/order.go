// Package orderrec holds the record of the rich codec benchmarks in package
// bench: an order as a shop's service would write it, with a nested
// customer, an optional shipping address, line items, attributes, tags and
// times. It is written as a user would write it, not shaped for the codec;
// package msgporder is its peer for tinylib/msgp, with the same fields.
package orderrec

import "time"

//go:generate go run github.com/streamgen/streamgen/cmd/streamgen

// Order is one order placed in a shop.
//
//streamgen:record
type Order struct {
	ID         int64             `json:"id" stream:"key"`
	Placed     time.Time         `json:"placed"`
	Updated    time.Time         `json:"updated"`
	Status     string            `json:"status"`
	Customer   Customer          `json:"customer"`
	ShipTo     *Address          `json:"ship_to,omitempty"`
	Items      []LineItem        `json:"items"`
	Attributes map[string]string `json:"attributes,omitempty"`
	Tags       []string          `json:"tags"`
	Total      float64           `json:"total"`
	Currency   string            `json:"currency"`
	Paid       bool              `json:"paid"`
	Gift       bool              `json:"gift"`
	Note       string            `json:"note,omitempty"`
	Attempts   int32             `json:"attempts"`
}

// Customer is who placed an order.
type Customer struct {
	ID      int64     `json:"id"`
	Name    string    `json:"name"`
	Email   string    `json:"email"`
	Since   time.Time `json:"since"`
	Loyalty int       `json:"loyalty"`
	VIP     bool      `json:"vip"`
}

// Address is where an order is shipped.
type Address struct {
	Street  string `json:"street"`
	City    string `json:"city"`
	Zip     string `json:"zip"`
	Country string `json:"country"`
}

// LineItem is one product in an order.
type LineItem struct {
	SKU      string  `json:"sku"`
	Name     string  `json:"name"`
	Quantity int     `json:"quantity"`
	Price    float64 `json:"price"`
	Discount float64 `json:"discount,omitempty"`
}
