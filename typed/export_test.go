package typed

// WriteBinaryRecordKeys makes the queries built after it store record keys
// in their binary encoding, as versions before ordered keys did (on), or
// in their ordered encoding (off).
func WriteBinaryRecordKeys(on bool) { binaryRecordKeys.Store(on) }
