// Package names declares types named like the locals of generated code,
// which the generated code must not hide.
package names

import "time"

type (
	p   struct{ X int }
	q   int8
	x   uint16
	n   int32
	c   bool
	s   string
	e   string
	i   int64
	k   float32
	all string
	buf []byte
	ok  bool
	m   map[string]int
	val float64
	key string
	sl  []string
	u   uint
	w   time.Duration
)

// Wide has more than 24 fields, so that its decoder's fast path is split
// into functions.
//
//streamgen:record
type Wide struct {
	B    string
	P    *p
	Ps   []p
	Q    q
	X    x
	N    n
	C    c
	S    s
	E    e
	E2   e
	I    i
	K    k
	All  all
	Buf  buf
	Ok   ok
	M    m
	Val  val
	Key  key
	Sl   sl
	U    u
	W    w
	Keys map[key]val
	Opt  *e
	Text string
	More string
	Last i
}

// copy hides the builtin in this package; generated code does not call it.
func copy(dst, src string) error { return nil }
