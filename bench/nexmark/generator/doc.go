// Package generator is a deterministic Go port of the Nexmark event
// generator of github.com/nexmark/nexmark (the Flink flavour, at commit
// 6b3646c): the stream of people, auctions and bids the Nexmark queries
// read, as package model's records.
//
// The port follows upstream call for call: the same id arithmetic, the
// same event-time spacing, the same split rules and the same sequence of
// draws from the same random generator (a port of Java's
// SplittableRandom), so that with the same seeds it produces upstream's
// events field for field. Upstream's RNGs are unseeded; the port seeds
// them (Config.Seed per split, fixed seeds for the two static caches; see
// New), and it takes the base time as Config.BaseTime rather than the
// wall clock. It keeps upstream's quirks, the bidder ids offset by 2000
// in particular, because the published figures were produced with them.
// testdata holds events of the upstream Java classes, run with the same
// seeds, and the program that wrote them (testdata/refgen).
//
// A Generator produces one split; Merged and WriteFiles produce the whole
// stream. Generators do not allocate per event once warm, and do not pace
// themselves: dateTime says when an event happens in event time, and a
// source that wants upstream's rate can wait until then.
package generator
