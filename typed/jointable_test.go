package typed_test

import (
	"context"
	"fmt"
	"iter"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/streamgen/streamgen/generated/fixtures"
	"github.com/streamgen/streamgen/runtime"
	"github.com/streamgen/streamgen/typed"
)

// word is a row of a static table: a number and its name.
type word struct {
	Number int
	Word   string
}

// TestSparkStreamStaticJoin is Spark's StreamSuite "join": a stream of
// numbers joined (inner) with a static table of their names.
func TestSparkStreamStaticJoin(t *testing.T) {
	small := typed.TableOf([]word{{1, "one"}, {2, "two"}, {4, "four"}}, func(w *word) int { return w.Number })
	m := typed.NewMemoryStream[valueRow]("values", 0)
	joined := typed.JoinTable(typed.FromMemory(m), func(v *valueRow) int { return v.V }, small, typed.Inner,
		func(j typed.Joined[int, valueRow, word]) string {
			return fmt.Sprintf("(%d,%d,%s)", j.Left.V, j.Right.Number, j.Right.Word)
		})
	sink := newSink[string]()
	ck := newCheckpoint()
	m.Add(valueRows(1, 2, 3)...)
	if err := runToEnd(t, typed.WriteTo(joined, sink), ck.opts()...); err != nil {
		t.Fatal(err)
	}
	if got, want := sortedRows(sink.rows()), []string{"(1,1,one)", "(2,2,two)"}; !slices.Equal(got, want) {
		t.Fatalf("rows %q, want %q", got, want)
	}
	m.Add(valueRows(4)...)
	if err := runToEnd(t, typed.WriteTo(joined, sink), ck.opts()...); err != nil {
		t.Fatal(err)
	}
	if got, want := sortedRows(sink.rows()), []string{"(1,1,one)", "(2,2,two)", "(4,4,four)"}; !slices.Equal(got, want) {
		t.Fatalf("rows %q, want %q", got, want)
	}
}

func sortedRows(rows []string) []string {
	rows = slices.Clone(rows)
	slices.Sort(rows)
	return rows
}

// pageKey is a join key with a null part, as SQL's: the page of a click,
// null when the click has none.
type pageKey struct {
	Page string
	Null bool
}

func (k pageKey) HasNull() bool { return k.Null }

// pageInfo is a row of a table of pages.
type pageInfo struct {
	Page  string
	Title string
}

// TestJoinTableAgainstALoop: every join type of a stream of clicks with a
// table of pages (several rows for some pages, none for others, and clicks
// with no page, whose key is null) writes what a plain loop over the
// clicks and the table writes, in one batch or many, across a restart.
func TestJoinTableAgainstALoop(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	var pages []pageInfo
	for p := range 8 {
		for v := range p % 3 { // pages 0, 3, 6 have no row; 2, 5 two
			pages = append(pages, pageInfo{Page: fmt.Sprint("p", p), Title: fmt.Sprintf("t%d.%d", p, v)})
		}
	}
	// A row whose key is null too: null does not match null.
	pages = append(pages, pageInfo{Title: "no page"})
	var clicks []fixtures.Click
	for i := range 200 {
		c := fixtures.Click{User: fmt.Sprint("u", i%13), Time: at(i)}
		if rng.IntN(10) > 0 {
			c.Page = fmt.Sprint("p", rng.IntN(9))
		}
		clicks = append(clicks, c)
	}
	keyOf := func(c *fixtures.Click) pageKey { return pageKey{Page: c.Page, Null: c.Page == ""} }
	text := func(c *fixtures.Click, p *pageInfo) string {
		s := fmt.Sprintf("%s@%d", c.User, c.Time.Unix())
		if p != nil {
			s += " " + p.Title
		}
		return s
	}
	// The plain loop.
	want := map[typed.JoinType][]string{}
	for i := range clicks {
		c := &clicks[i]
		var matched []string
		for j := range pages {
			if c.Page != "" && pages[j].Page == c.Page {
				matched = append(matched, text(c, &pages[j]))
			}
		}
		want[typed.Inner] = append(want[typed.Inner], matched...)
		want[typed.LeftOuter] = append(want[typed.LeftOuter], matched...)
		want[typed.RightOuter] = append(want[typed.RightOuter], matched...) // JoinTableStream: the table on the left
		if len(matched) == 0 {
			want[typed.LeftOuter] = append(want[typed.LeftOuter], text(c, nil))
			want[typed.RightOuter] = append(want[typed.RightOuter], text(c, nil))
			want[typed.LeftAnti] = append(want[typed.LeftAnti], text(c, nil))
		} else {
			want[typed.LeftSemi] = append(want[typed.LeftSemi], text(c, nil))
		}
	}
	for how, rows := range want {
		if len(rows) < 10 {
			t.Fatalf("%v: the loop writes %d rows: the case tests little", how, len(rows))
		}
	}
	table := typed.TableOf(pages, func(p *pageInfo) pageKey { return pageKey{Page: p.Page, Null: p.Page == ""} })
	for _, how := range []typed.JoinType{typed.Inner, typed.LeftOuter, typed.LeftSemi, typed.LeftAnti, typed.RightOuter} {
		for _, perBatch := range []int{1, 7, 0} {
			t.Run(fmt.Sprintf("%v/rows-per-batch=%d", how, perBatch), func(t *testing.T) {
				m := typed.NewMemoryStream[fixtures.Click]("clicks", perBatch)
				var joined typed.Stream[string]
				if how == typed.RightOuter {
					joined = typed.JoinTableStream(table, typed.FromMemory(m), keyOf, how, func(j typed.Joined[pageKey, pageInfo, fixtures.Click]) string {
						return text(j.Right, j.Left)
					})
				} else {
					joined = typed.JoinTable(typed.FromMemory(m), keyOf, table, how, func(j typed.Joined[pageKey, fixtures.Click, pageInfo]) string {
						return text(j.Left, j.Right)
					})
				}
				sink := newSink[string]()
				ck := newCheckpoint()
				m.Add(clicks[:100]...)
				if err := runToEnd(t, typed.WriteTo(joined, sink), ck.opts()...); err != nil {
					t.Fatal(err)
				}
				m.Add(clicks[100:]...)
				if err := runToEnd(t, typed.WriteTo(joined, sink), ck.opts()...); err != nil {
					t.Fatal(err)
				}
				if got, want := sortedRows(sink.rows()), sortedRows(want[how]); !slices.Equal(got, want) {
					t.Fatalf("%d rows, want %d; first difference:\n%s", len(got), len(want), firstDifference(got, want))
				}
			})
		}
	}
}

// TestJoinTableRefusesWhatSparkRefuses: the outer joins that would have to
// write the table's unmatched rows are refused at Start, with Spark's
// reason.
func TestJoinTableRefusesWhatSparkRefuses(t *testing.T) {
	table := typed.TableOf([]word{{1, "one"}}, func(w *word) int { return w.Number })
	m := typed.NewMemoryStream[valueRow]("values", 0)
	key := func(v *valueRow) int { return v.V }
	row := func(typed.Joined[int, valueRow, word]) int { return 0 }
	rowRight := func(typed.Joined[int, word, valueRow]) int { return 0 }
	for _, tc := range []struct {
		s    typed.Stream[int]
		want string
	}{
		{typed.JoinTable(typed.FromMemory(m), key, table, typed.RightOuter, row), "RightOuter join with a streaming DataFrame/Dataset on the left and a static DataFrame/DataSet on the right not supported"},
		{typed.JoinTable(typed.FromMemory(m), key, table, typed.FullOuter, row), "FullOuter joins with streaming DataFrames/Datasets on the left and a static DataFrame/Dataset on the right is not supported"},
		{typed.JoinTableStream(table, typed.FromMemory(m), key, typed.LeftOuter, rowRight), "LeftOuter join with a streaming DataFrame/Dataset on the right and a static DataFrame/Dataset on the left is not supported"},
		{typed.JoinTableStream(table, typed.FromMemory(m), key, typed.FullOuter, rowRight), "FullOuter joins with streaming DataFrames/Datasets on the right and a static DataFrame/Dataset on the left is not supported"},
		{typed.JoinTableStream(table, typed.FromMemory(m), key, typed.LeftAnti, rowRight), "LeftAnti joins with a streaming DataFrame/Dataset on the right are not supported"},
	} {
		_, err := typed.WriteTo(tc.s, newSink[int]()).Start(t.Context())
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("err = %v, want one saying %q", err, tc.want)
		}
	}
}

// TestTableFromStreamAggregates: a table loaded from a bounded stream that
// ends in an aggregation (average values per user over files) holds the
// aggregation's whole result, and is what the stream joins.
func TestTableFromStreamAggregates(t *testing.T) {
	dir := t.TempDir()
	var lines []string
	sums := map[string][2]float64{}
	for i := range 60 {
		user := fmt.Sprint("u", i%4)
		v := float64(i % 7)
		lines = append(lines, fmt.Sprintf(`{"User":%q,"Count":%d}`, user, int(v)))
		s := sums[user]
		sums[user] = [2]float64{s[0] + v, s[1] + 1}
	}
	if err := os.WriteFile(filepath.Join(dir, "part-0.json"), []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	history := typed.From[fixtures.UserCount](runtime.FilesSource(dir, runtime.FilesOptions{}))
	averages := typed.AggregateByKey(typed.GroupByKey(history, func(u *fixtures.UserCount) string { return u.User }),
		typed.Avg(func(u *fixtures.UserCount) float64 { return float64(u.Count) }), func(u string, avg float64) userStat { return userStat{u, avg} })
	table := typed.TableFromStream(averages, func(s *userStat) string { return s.User }, typed.TableName("history"))
	m := typed.NewMemoryStream[fixtures.Click]("clicks", 0)
	m.Add(click("u0", 1), click("u3", 2), click("u9", 3))
	joined := typed.JoinTable(typed.FromMemory(m), func(c *fixtures.Click) string { return c.User }, table, typed.LeftOuter,
		func(j typed.Joined[string, fixtures.Click, userStat]) string {
			if j.Right == nil {
				return j.Key + " none"
			}
			return fmt.Sprintf("%s %.4f", j.Key, j.Right.Value)
		})
	sink := newSink[string]()
	q, err := typed.WriteTo(joined, sink).Start(t.Context(), newCheckpoint().opts(runtime.WithTrigger(runtime.AvailableNow()))...)
	if err != nil {
		t.Fatal(err)
	}
	if err := q.AwaitTermination(); err != nil {
		t.Fatal(err)
	}
	avg := func(u string) float64 { return sums[u][0] / sums[u][1] }
	want := []string{fmt.Sprintf("u0 %.4f", avg("u0")), fmt.Sprintf("u3 %.4f", avg("u3")), "u9 none"}
	if got := sortedRows(sink.rows()); !slices.Equal(got, want) {
		t.Fatalf("rows %q, want %q", got, want)
	}
	p, _ := q.LastProgress()
	if len(p.Tables) != 1 || p.Tables[0].Name != "history" || p.Tables[0].Version != 1 || p.Tables[0].Rows != 4 {
		t.Fatalf("progress tables %+v, want history version 1 of 4 rows", p.Tables)
	}
}

// TestTableFromStreamDeadLetters: the rows of a table's stream that do
// not decode go to the dead letters of the query that joins the table,
// once, with the first batch that joins with the load that read them
// (they were only logged), and the rows that decode make the table.
func TestTableFromStreamDeadLetters(t *testing.T) {
	dir := t.TempDir()
	files := map[string]string{
		"part-0.json": `{"User":"u0","Count":1}` + "\n" + `{"User":"u1","Count":` + "\n" + `{"User":"u2","Count":3}` + "\n",
		"part-1.json": `{"User":"u3","Count":4}` + "\n" + `not json` + "\n",
	}
	var malformed []string
	for _, name := range slices.Sorted(maps.Keys(files)) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(files[name]), 0o644); err != nil {
			t.Fatal(err)
		}
		for line := range strings.Lines(files[name]) {
			var u fixtures.UserCount
			if u.UnmarshalJSON([]byte(line)) != nil {
				malformed = append(malformed, strings.TrimSuffix(line, "\n"))
			}
		}
	}
	table := typed.TableFromStream(typed.From[fixtures.UserCount](runtime.FilesSource(dir, runtime.FilesOptions{})),
		func(u *fixtures.UserCount) string { return u.User }, typed.TableName("counts"))
	m := typed.NewMemoryStream[fixtures.Click]("clicks", 0)
	joined := typed.JoinTable(typed.FromMemory(m), func(c *fixtures.Click) string { return c.User }, table, typed.LeftOuter,
		func(j typed.Joined[string, fixtures.Click, fixtures.UserCount]) string {
			if j.Right == nil {
				return j.Key + " none"
			}
			return fmt.Sprintf("%s %d", j.Key, j.Right.Count)
		})
	dead := runtime.DeadLetterMemory()
	sink := newSink[string]()
	q, err := typed.WriteTo(joined, sink).Start(t.Context(), newCheckpoint().opts(runtime.DeadLetters(dead))...)
	if err != nil {
		t.Fatal(err)
	}
	defer q.Stop()
	for _, users := range [][]string{{"u0", "u1"}, {"u2", "u3"}} {
		m.Add(click(users[0], 1), click(users[1], 2))
		if err := q.ProcessAllAvailable(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	if got, want := sortedRows(sink.rows()), []string{"u0 1", "u1 none", "u2 3", "u3 4"}; !slices.Equal(got, want) {
		t.Errorf("rows %q, want %q", got, want)
	}
	var raws []string
	for _, d := range dead.Letters() {
		raws = append(raws, d.Raw)
	}
	if !slices.Equal(raws, malformed) {
		t.Errorf("dead letters %q, want the table's malformed lines %q, once", raws, malformed)
	}
	var perBatch []int64
	for _, p := range q.RecentProgress() {
		perBatch = append(perBatch, p.NumDeadLetters)
	}
	if want := []int64{int64(len(malformed)), 0}; !slices.Equal(perBatch, want) {
		t.Errorf("dead letters by batch %v, want %v: all with the first batch that joins", perBatch, want)
	}
}

// TestTableDeadLettersOnceARun: a table's stream refreshed (its
// directory has a file more) reads its malformed rows again: the
// query's dead letters get each once, the new one with the first batch
// that joins with the new version.
func TestTableDeadLettersOnceARun(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		dir := t.TempDir()
		write := func(name, content string) {
			if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		write("part-0.json", `{"User":"u0","Count":1}`+"\n"+`{"User":`+"\n")
		table := typed.TableFromStream(typed.From[fixtures.UserCount](runtime.FilesSource(dir, runtime.FilesOptions{})),
			func(u *fixtures.UserCount) string { return u.User }, typed.TableName("counts"), typed.RefreshEvery(time.Minute))
		m := typed.NewMemoryStream[fixtures.Click]("clicks", 0)
		joined := typed.JoinTable(typed.FromMemory(m), func(c *fixtures.Click) string { return c.User }, table, typed.Inner,
			func(j typed.Joined[string, fixtures.Click, fixtures.UserCount]) string {
				return fmt.Sprintf("%s %d", j.Key, j.Right.Count)
			})
		dead := runtime.DeadLetterMemory()
		sink := newSink[string]()
		q, err := typed.WriteTo(joined, sink).Start(context.Background(),
			newCheckpoint().opts(runtime.DeadLetters(dead), runtime.WithTrigger(runtime.ProcessingTime(10*time.Second)))...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { q.Stop() })
		synctest.Wait()
		m.Add(click("u0", 1))
		time.Sleep(10 * time.Second) // a batch at 10 s: version 1
		synctest.Wait()
		write("part-1.json", `{"User":"u1","Count":2}`+"\n"+`nope`+"\n")
		time.Sleep(55 * time.Second) // the refresh at 60 s loads version 2
		synctest.Wait()
		m.Add(click("u1", 2))
		time.Sleep(10 * time.Second) // the batch at 70 s uses it
		synctest.Wait()
		if got, want := sink.rows(), []string{"u0 1", "u1 2"}; !slices.Equal(got, want) {
			t.Errorf("rows %q, want %q", got, want)
		}
		var letters []string
		for _, d := range dead.Letters() {
			letters = append(letters, d.Position)
		}
		if want := []string{"part-0.json:2", "part-1.json:2"}; !slices.Equal(letters, want) {
			t.Errorf("dead letters at %q, want %q: each once", letters, want)
		}
	})
}

// TestTableRefresh: a table refreshed every minute is loaded again off
// the batch path; each batch joins with one version, which its progress
// names, and the batches after a load use the new one.
func TestTableRefresh(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var loads atomic.Int64
		table := typed.TableFromFunc(func(context.Context) ([]word, error) {
			n := loads.Add(1)
			return []word{{1, fmt.Sprint("one-v", n)}}, nil
		}, func(w *word) int { return w.Number }, typed.TableName("names"), typed.RefreshEvery(time.Minute))
		m := typed.NewMemoryStream[valueRow]("values", 0)
		joined := typed.JoinTable(typed.FromMemory(m), func(v *valueRow) int { return v.V }, table, typed.Inner,
			func(j typed.Joined[int, valueRow, word]) string { return j.Right.Word })
		sink := newSink[string]()
		q, err := typed.WriteTo(joined, sink).Start(context.Background(), newCheckpoint().opts(runtime.WithTrigger(runtime.ProcessingTime(10*time.Second)))...)
		if err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		m.Add(valueRows(1)...)
		time.Sleep(10 * time.Second) // a batch at 10 s: version 1
		synctest.Wait()
		time.Sleep(55 * time.Second) // the refresh at 60 s loads version 2
		synctest.Wait()
		m.Add(valueRows(1)...)
		time.Sleep(10 * time.Second) // the batch at 70 s uses it
		synctest.Wait()
		if err := q.Stop(); err != nil {
			t.Fatal(err)
		}
		if got, want := sink.rows(), []string{"one-v1", "one-v2"}; !slices.Equal(got, want) {
			t.Fatalf("rows %q, want %q", got, want)
		}
		var versions []int64
		for _, p := range q.RecentProgress() {
			for _, tp := range p.Tables {
				versions = append(versions, tp.Version)
			}
		}
		if !slices.Equal(versions, []int64{1, 2}) {
			t.Fatalf("table versions in the progress %v, want [1 2]", versions)
		}
	})
}

// wordCounter names each number by its latest word and how many words
// it has had: a table's stream with state.
type wordCounter struct{ seen *typed.ValueState[int64] }

func (p *wordCounter) Init(h *typed.Handle) error {
	p.seen = typed.NewValueState[int64](h, "seen")
	return nil
}

func (p *wordCounter) HandleInputRows(ctx context.Context, n int, rows iter.Seq[word], _ typed.TimerValues, emit func(word)) error {
	seen, _, err := p.seen.Get(ctx)
	if err != nil {
		return err
	}
	var last string
	for w := range rows {
		seen++
		last = w.Word
	}
	emit(word{n, fmt.Sprint(last, "#", seen)})
	return p.seen.Update(ctx, seen)
}

// TestTableFromStreamInTwoQueries: two queries join one table read from a
// stream with a transformWithState, refreshed every minute. Both load it
// at their start, and both take the new version once the table's source
// has more: a query's refresh neither hides the change from the other
// nor finds the table's processor in use by the other's load.
func TestTableFromStreamInTwoQueries(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		words := typed.NewMemoryStream[word]("words", 0)
		words.Add(word{1, "one"})
		counted := typed.TransformWithState(typed.GroupByKey(typed.FromMemory(words), func(w *word) int { return w.Number }),
			&wordCounter{}, typed.TimeModeNone, typed.Update)
		table := typed.TableFromStream(counted, func(w *word) int { return w.Number }, typed.TableName("words"), typed.RefreshEvery(time.Minute))
		var values []*typed.MemoryStream[valueRow]
		var sinks []*batchSink[string]
		for range 2 {
			m := typed.NewMemoryStream[valueRow]("values", 0)
			joined := typed.JoinTable(typed.FromMemory(m), func(v *valueRow) int { return v.V }, table, typed.Inner,
				func(j typed.Joined[int, valueRow, word]) string { return j.Right.Word })
			sink := newSink[string]()
			q, err := typed.WriteTo(joined, sink).Start(context.Background(), newCheckpoint().opts(runtime.WithTrigger(runtime.ProcessingTime(10*time.Second)))...)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { q.Stop() })
			values, sinks = append(values, m), append(sinks, sink)
		}
		synctest.Wait()
		for _, m := range values {
			m.Add(valueRows(1)...)
		}
		time.Sleep(10 * time.Second) // a batch at 10 s: version 1
		synctest.Wait()
		words.Add(word{1, "uno"})
		time.Sleep(55 * time.Second) // the refreshes at 60 s load version 2
		synctest.Wait()
		for _, m := range values {
			m.Add(valueRows(1)...)
		}
		time.Sleep(10 * time.Second) // the batches at 70 s use it
		synctest.Wait()
		for i, sink := range sinks {
			if got, want := sink.rows(), []string{"one#1", "uno#2"}; !slices.Equal(got, want) {
				t.Errorf("query %d: rows %q, want %q", i, got, want)
			}
		}
	})
}

// TestTableOnDisk: a table larger than TableOnDiskAbove's limit is kept in
// a store on disk, and every join type writes what a plain loop writes
// (several rows for some keys, none for others, keys that are records),
// in one batch or many, across a restart; the progress says the version
// is on disk, and the store's directory is gone once the query stops.
func TestTableOnDisk(t *testing.T) {
	var counts []fixtures.UserCount
	for u := range 40 {
		for v := range u % 3 { // users 0, 3, 6… have no row; 2, 5… two
			counts = append(counts, fixtures.UserCount{User: fmt.Sprint("u", u), Count: int64(10*u + v)})
		}
	}
	var clicks []fixtures.Click
	for i := range 300 {
		clicks = append(clicks, fixtures.Click{User: fmt.Sprint("u", (i*7)%45), Time: at(i), Page: fmt.Sprint("p", i%4)})
	}
	keyOf := func(c *fixtures.Click) fixtures.PageKey { return fixtures.PageKey{User: c.User} }
	text := func(c *fixtures.Click, u *fixtures.UserCount) string {
		s := fmt.Sprintf("%s@%d", c.User, c.Time.Unix())
		if u != nil {
			s += fmt.Sprint(" ", u.Count)
		}
		return s
	}
	want := map[typed.JoinType][]string{}
	for i := range clicks {
		c := &clicks[i]
		var matched []string
		for j := range counts {
			if counts[j].User == c.User {
				matched = append(matched, text(c, &counts[j]))
			}
		}
		want[typed.Inner] = append(want[typed.Inner], matched...)
		want[typed.LeftOuter] = append(want[typed.LeftOuter], matched...)
		if len(matched) == 0 {
			want[typed.LeftOuter] = append(want[typed.LeftOuter], text(c, nil))
			want[typed.LeftAnti] = append(want[typed.LeftAnti], text(c, nil))
		} else {
			want[typed.LeftSemi] = append(want[typed.LeftSemi], text(c, nil))
		}
	}
	dir := t.TempDir()
	table := typed.TableOf(counts, func(u *fixtures.UserCount) fixtures.PageKey { return fixtures.PageKey{User: u.User} },
		typed.TableName("counts"), typed.TableOnDiskAbove(10), typed.TableDir(dir))
	for _, how := range []typed.JoinType{typed.Inner, typed.LeftOuter, typed.LeftSemi, typed.LeftAnti} {
		for _, perBatch := range []int{1, 17, 0} {
			t.Run(fmt.Sprintf("%v/rows-per-batch=%d", how, perBatch), func(t *testing.T) {
				m := typed.NewMemoryStream[fixtures.Click]("clicks", perBatch)
				joined := typed.JoinTable(typed.FromMemory(m), keyOf, table, how, func(j typed.Joined[fixtures.PageKey, fixtures.Click, fixtures.UserCount]) string {
					return text(j.Left, j.Right)
				})
				sink := newSink[string]()
				ck := newCheckpoint()
				for _, part := range [][]fixtures.Click{clicks[:150], clicks[150:]} {
					m.Add(part...)
					q, err := typed.WriteTo(joined, sink).Start(context.Background(), ck.opts(runtime.WithTrigger(runtime.AvailableNow()))...)
					if err != nil {
						t.Fatal(err)
					}
					if err := q.AwaitTermination(); err != nil {
						t.Fatal(err)
					}
					p, ok := q.LastProgress()
					if !ok || len(p.Tables) != 1 || !p.Tables[0].OnDisk || p.Tables[0].Rows != int64(len(counts)) {
						t.Fatalf("the last batch's tables: %+v, want counts on disk", p.Tables)
					}
					if left, _ := os.ReadDir(dir); len(left) != 0 {
						t.Fatalf("the query stopped and left %d table stores behind", len(left))
					}
				}
				if got, want := sortedRows(sink.rows()), sortedRows(want[how]); !slices.Equal(got, want) {
					t.Fatalf("%d rows, want %d; first difference:\n%s", len(got), len(want), firstDifference(got, want))
				}
			})
		}
	}
}

// TestTableJoinedTwice: a table joined twice in a row, the second join on
// a column of the first's matches, gives every pair of matches, in memory
// and on disk (where the two joins share one version of the table, and
// each reads a key's rows into a slice of its own).
func TestTableJoinedTwice(t *testing.T) {
	// A user's teams, each a row (User, and the team as Page); the second
	// join looks up the teams of the user's partner.
	teams := []fixtures.Click{{User: "ann", Page: "red"}, {User: "ann", Page: "blue"}, {User: "bob", Page: "green"}, {User: "bob", Page: "yellow"}}
	partner := map[string]string{"ann": "bob", "bob": "ann"}
	var want []string
	for _, a := range teams {
		for _, b := range teams {
			if a.User == "ann" && b.User == partner[a.User] {
				want = append(want, a.Page+"+"+b.Page)
			}
		}
	}
	slices.Sort(want)
	for _, onDisk := range []bool{false, true} {
		t.Run(fmt.Sprint("onDisk=", onDisk), func(t *testing.T) {
			opts := []typed.TableOption{typed.TableName("teams")}
			if onDisk {
				opts = append(opts, typed.TableOnDiskAbove(1), typed.TableDir(t.TempDir()))
			}
			table := typed.TableOf(teams, func(r *fixtures.Click) string { return r.User }, opts...)
			m := typed.NewMemoryStream[fixtures.Click]("clicks", 0)
			m.Add(fixtures.Click{User: "ann", Time: at(1)})
			first := typed.JoinTable(typed.FromMemory(m), func(c *fixtures.Click) string { return c.User }, table, typed.Inner,
				func(j typed.Joined[string, fixtures.Click, fixtures.Click]) fixtures.Click { return *j.Right })
			pairs := typed.JoinTable(first, func(a *fixtures.Click) string { return partner[a.User] }, table, typed.Inner,
				func(j typed.Joined[string, fixtures.Click, fixtures.Click]) string {
					return j.Left.Page + "+" + j.Right.Page
				})
			sink := newSink[string]()
			if err := runToEnd(t, typed.WriteTo(pairs, sink)); err != nil {
				t.Fatal(err)
			}
			if got := sortedRows(sink.rows()); !slices.Equal(got, want) {
				t.Fatalf("got %v, want %v", got, want)
			}
		})
	}
}

// TestTableOnDiskVersions: each refresh of a table on disk writes a store
// of its own, and the version before is removed once no batch uses it.
func TestTableOnDiskVersions(t *testing.T) {
	dir := t.TempDir()
	stores := func() int {
		entries, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		return len(entries)
	}
	synctest.Test(t, func(t *testing.T) {
		var loads atomic.Int64
		table := typed.TableFromFunc(func(context.Context) ([]fixtures.UserCount, error) {
			n := loads.Add(1)
			return []fixtures.UserCount{{User: "a", Count: n}, {User: "b", Count: 10 * n}}, nil
		}, func(u *fixtures.UserCount) string { return u.User }, typed.RefreshEvery(time.Minute), typed.TableOnDiskAbove(1), typed.TableDir(dir))
		m := typed.NewMemoryStream[fixtures.Click]("clicks", 0)
		joined := typed.JoinTable(typed.FromMemory(m), func(c *fixtures.Click) string { return c.User }, table, typed.Inner,
			func(j typed.Joined[string, fixtures.Click, fixtures.UserCount]) int64 { return j.Right.Count })
		sink := newSink[int64]()
		q, err := typed.WriteTo(joined, sink).Start(context.Background(), newCheckpoint().opts(runtime.WithTrigger(runtime.ProcessingTime(10*time.Second)))...)
		if err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if n := stores(); n != 1 {
			t.Errorf("%d stores after the first load, want 1", n)
		}
		for minute := range 3 {
			m.Add(fixtures.Click{User: "a"}, fixtures.Click{User: "b"}, fixtures.Click{User: "c"})
			time.Sleep(10 * time.Second) // a batch uses this minute's version
			synctest.Wait()
			time.Sleep(50 * time.Second) // the next version replaces it
			synctest.Wait()
			if n := stores(); n != 1 {
				t.Errorf("minute %d: %d stores, want the current version's only", minute, n)
			}
		}
		if err := q.Stop(); err != nil {
			t.Fatal(err)
		}
		if n := stores(); n != 0 {
			t.Errorf("%d stores after the query stopped, want none", n)
		}
		if got, want := sink.rows(), []int64{1, 10, 2, 20, 3, 30}; !slices.Equal(got, want) {
			t.Fatalf("rows %v, want %v", got, want)
		}
	})
}

// TestTableOnDiskRefusesPlainTypes: a table on disk needs a binary
// encoding of its rows; Start says so.
func TestTableOnDiskRefusesPlainTypes(t *testing.T) {
	table := typed.TableOf([]pageInfo{{Page: "p"}}, func(p *pageInfo) string { return p.Page }, typed.TableOnDiskAbove(1))
	m := typed.NewMemoryStream[fixtures.Click]("clicks", 0)
	joined := typed.JoinTable(typed.FromMemory(m), func(c *fixtures.Click) string { return c.Page }, table, typed.Inner,
		func(j typed.Joined[string, fixtures.Click, pageInfo]) string { return j.Right.Title })
	_, err := typed.WriteTo(joined, newSink[string]()).Start(context.Background(), newCheckpoint().opts()...)
	if err == nil || !strings.Contains(err.Error(), "TableOnDiskAbove: the rows") {
		t.Fatalf("Start: %v, want a refusal of the rows' type", err)
	}
}
