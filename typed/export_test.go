package typed

// WriteBinaryRecordKeys makes the queries built after it store record keys
// in their binary encoding, as versions before ordered keys did (on), or
// in their ordered encoding (off).
func WriteBinaryRecordKeys(on bool) { binaryRecordKeys.Store(on) }

// WritePerWindowSliding makes the queries built after it keep sliding
// and cumulative windows' state per window, as versions before slices
// did (on), or by slices (off).
func WritePerWindowSliding(on bool) { perWindowSliding.Store(on) }

// WriteSlicesWhateverTheOrder makes the queries built after it keep
// sliding and cumulative windows by slices whatever their aggregator, as
// versions before Reduce and CollectList kept theirs per window did
// (on), or as now (off).
func WriteSlicesWhateverTheOrder(on bool) { slicesWhateverTheOrder.Store(on) }

// WriteTimeDifferenceAtEnd makes the queries built after it close the
// windows of a time difference once the watermark reaches their last
// instant, as versions before WindowsMeta.PastEnd did (on), or once it
// is past it (off).
func WriteTimeDifferenceAtEnd(on bool) { timeDifferenceAtEnd.Store(on) }

// WindowKeys encodes and decodes the stored keys, with string keys, of a
// windowed aggregation or of a window join on some windows.
type WindowKeys struct {
	Encode func(start int64, key string) ([]byte, error)
	Decode func(stored []byte) (start int64, key string, err error)
}

// NewWindowKeys returns the key codec of a window join on w (join), or
// of a windowed aggregation on w.
func NewWindowKeys(w Windows, join bool) WindowKeys {
	kc, err := newKeyCodec[string]()
	if err != nil {
		panic(err)
	}
	if !join {
		c := windowedCodec(kc, w)
		return WindowKeys{
			Encode: func(start int64, key string) ([]byte, error) {
				return c.encode(nil, &windowKey[string]{start: start, key: key})
			},
			Decode: func(b []byte) (int64, string, error) {
				var k windowKey[string]
				err := c.decode(b, &k)
				return k.start, k.key, err
			},
		}
	}
	c, err := joinKeyCodec(kc, &w)
	if err != nil {
		panic(err)
	}
	return WindowKeys{
		Encode: func(start int64, key string) ([]byte, error) {
			return c.encode(nil, &joinKey[string]{start: start, key: key})
		},
		Decode: func(b []byte) (int64, string, error) {
			var k joinKey[string]
			err := c.decode(b, &k)
			return k.start, k.key, err
		},
	}
}
