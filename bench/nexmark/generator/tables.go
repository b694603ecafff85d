package generator

import (
	"math/bits"
	"strconv"
	"sync"
)

// Seeds of the two static random generators of upstream, which build
// caches once per JVM from an unseeded SplittableRandom. The port seeds
// them with fixed values, the ones the Java harness in testdata/refgen
// uses, so that every process builds the same caches.
const (
	// urlCacheSeed seeds BidGenerator's static RNG: the 4 hot URLs and
	// the 10,000 channel URLs.
	urlCacheSeed = 7
	// extraStringSeed seeds StringsGenerator's static RNG: the 1 MiB
	// string the extra fields are cut from.
	extraStringSeed = 11
)

const (
	// extraStringLen is the length of StringsGenerator.REUSABLE_EXTRA_STRING.
	extraStringLen = 1024 * 1024
	// channelsNumber is BidGenerator.CHANNELS_NUMBER.
	channelsNumber = 10_000
)

var (
	firstNames  = [...]string{"Peter", "Paul", "Luke", "John", "Saul", "Vicky", "Kate", "Julie", "Sarah", "Deiter", "Walter"}
	lastNames   = [...]string{"Shultz", "Abrams", "Spencer", "White", "Bartels", "Walton", "Smith", "Jones", "Noris"}
	usCities    = [...]string{"Phoenix", "Los Angeles", "San Francisco", "Boise", "Portland", "Bend", "Redmond", "Seattle", "Kent", "Cheyenne"}
	usStates    = [...]string{"AZ", "CA", "ID", "OR", "WA", "WY"}
	hotChannels = [...]string{"Google", "Facebook", "Baidu", "Apple"}
)

// tables are the read-only data shared by all generators of the process.
type tables struct {
	// extra is REUSABLE_EXTRA_STRING; extras are substrings of it.
	extra string
	// names[i*len(lastNames)+j] is firstNames[i] + " " + lastNames[j].
	names [len(firstNames) * len(lastNames)]string
	// hotURLs are BidGenerator.HOT_URLS, one per hot channel.
	hotURLs [len(hotChannels)]string
	// channels and urls are BidGenerator.CHANNEL_URL_CACHE.
	channels [channelsNumber]string
	urls     [channelsNumber]string
}

var (
	sharedOnce   sync.Once
	sharedTables *tables
)

// getTables builds the tables once (in some tens of milliseconds, with
// priceOf's table); they are read-only afterwards, so generators of any
// goroutine share them.
func getTables() *tables {
	sharedOnce.Do(func() {
		sharedTables = buildTables()
		pow10Table() // now rather than at the first price
	})
	return sharedTables
}

func buildTables() *tables {
	t := new(tables)

	r := newSplitRandom(extraStringSeed)
	t.extra = string(appendExactString(make([]byte, 0, extraStringLen), &r, extraStringLen))

	for i, f := range firstNames {
		for j, l := range lastNames {
			t.names[i*len(lastNames)+j] = f + " " + l
		}
	}

	// BidGenerator's static initialisers, in their textual order: the hot
	// URLs, then the cache.
	r = newSplitRandom(urlCacheSeed)
	var buf []byte
	for i := range t.hotURLs {
		buf = appendBaseURL(buf[:0], &r)
		t.hotURLs[i] = string(buf)
	}
	for i := range channelsNumber {
		buf = appendBaseURL(buf[:0], &r)
		if r.nextIntn(10) > 0 {
			// Math.abs(Integer.reverse(i)), in 32 bits: reverse(1) is
			// Integer.MIN_VALUE, whose abs is itself.
			v := int32(bits.Reverse32(uint32(i)))
			if v < 0 {
				v = -v
			}
			buf = append(buf, "&channel_id="...)
			buf = strconv.AppendInt(buf, int64(v), 10)
		}
		t.urls[i] = string(buf)
		t.channels[i] = "channel-" + strconv.Itoa(i)
	}
	return t
}

// appendBaseURL is BidGenerator.getBaseUrl.
func appendBaseURL(b []byte, r *splitRandom) []byte {
	b = append(b, "https://www.nexmark.com/"...)
	b = appendString(b, r, 5, '_')
	b = append(b, '/')
	b = appendString(b, r, 5, '_')
	b = append(b, '/')
	b = appendString(b, r, 5, '_')
	return append(b, "/item.htm?query=1"...)
}

// appendString appends StringsGenerator.nextString(r, maxLength, special)
// to b: 3 to maxLength-1 characters, each special with probability 1/13,
// otherwise a lowercase letter, then trimmed as Java's String.trim does
// (which strips the special character only when it is a space).
func appendString(b []byte, r *splitRandom, maxLength int32, special byte) []byte {
	n := 3 + r.nextIntn(maxLength-3)
	start := len(b)
	for range n {
		if r.nextIntn(13) == 0 {
			b = append(b, special)
		} else {
			b = append(b, byte('a'+r.nextIntn(26)))
		}
	}
	if special > ' ' {
		return b
	}
	// String.trim strips characters <= ' ' at both ends.
	end := len(b)
	for end > start && b[end-1] <= ' ' {
		end--
	}
	first := start
	for first < end && b[first] <= ' ' {
		first++
	}
	if first > start {
		copy(b[start:], b[first:end])
	}
	return b[:start+end-first]
}

// appendExactString appends what StringsGenerator.nextExactString
// generates when it does not cut the reusable string: length characters,
// six per nextInt. It keeps upstream's sign bug: Java's % of a negative
// int is negative, so the characters range over 'a'-25 to 'a'+25, that is
// 'H' to 'z' (including '[', '\\', ']', '^', '_' and '`').
func appendExactString(b []byte, r *splitRandom, length int) []byte {
	var rnd int32
	n := 0
	for range length {
		if n == 0 {
			rnd = r.nextInt()
			n = 6
		}
		b = append(b, byte('a'+rnd%26))
		rnd /= 26
		n--
	}
	return b
}
