package runtime

import (
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// BenchmarkStoreMetrics is the cost the progress report's StoreProgress
// adds to each batch: one Store.Metrics call.
func BenchmarkStoreMetrics(b *testing.B) {
	s, err := OpenStore("ckpt", StoreOptions{FS: vfs.NewMem()})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	for b.Loop() {
		s.Metrics()
	}
}

// BenchmarkRecordRead is the cost RecordRead adds to each record read
// from a files source for the running batch's status: counting it,
// publishing every 1024, and following its file.
func BenchmarkRecordRead(b *testing.B) {
	var q Query
	src := FilesSource(b.TempDir(), FilesOptions{}).(*filesSource)
	batch := &Batch{inputs: []inputRun{{name: "files", counter: src, planned: 1 << 30}}, live: &q.live}
	positions := make([]string, 1000)
	for i := range positions {
		positions[i] = "part-00001.jsonl:" + string(rune('0'+i%10))
	}
	r := Record{}
	i := 0
	for b.Loop() {
		r.Position = positions[i%len(positions)]
		batch.RecordRead(0, r)
		i++
	}
}
