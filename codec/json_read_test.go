package codec

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"math"
	"math/rand"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

// jtSyntaxOnly runs doc through the reader as one value of any type.
func jtSyntaxOnly(doc []byte) ([]byte, error) {
	var r JSONReader
	r.Reset(doc)
	raw, _ := r.RawValue()
	return raw, r.Finish()
}

// jtStdSyntax is encoding/json's verdict on doc's syntax: json.RawMessage
// accepts any well-formed value.
func jtStdSyntax(doc []byte) error {
	var m json.RawMessage
	return json.Unmarshal(doc, &m)
}

// jtSyntaxDocs are documents for the syntax-only comparison: each is run
// as it is and wrapped in arrays and objects.
var jtSyntaxDocs = []string{
	``, ` `, "\t\n\r ", `null`, `true`, `false`, `nul`, `nulx`, `nulll`, `tru`, `truE`, `fals`, `falsee`,
	`n`, `t`, `f`, `x`, `-`, `+1`, `.5`, `1.`, `1.e5`, `1e`, `1e+`, `1e-`, `1E5`, `1e+05`, `-0`, `-0.0e-0`,
	`01`, `00`, `-01`, `0x10`, `1_000`, `Infinity`, `NaN`, `-Infinity`, `1 2`, `1,`, `[1,]`, `[,1]`, `[1 2]`,
	`{}`, `{ }`, `[]`, `[ ]`, `{"a":1,}`, `{,"a":1}`, `{"a" 1}`, `{"a":}`, `{"a"}`, `{a:1}`, `{'a':1}`,
	`{"a":1 "b":2}`, `{"a":1]`, `[1}`, `[`, `{`, `]`, `}`, `[[]`, `{"a":[}`, `"abc`, `"abc\`, `"\x"`,
	`"\u12"`, `"\u12g4"`, `"\uD800"`, `"\'"`, `"\/"`, "\"\x00\"", "\"\x1f\"", "\"\x7f\"", "\"\xff\"",
	"\"\t\"", `"a"b`, `"a" "b"`, `[1]x`, `{}{}`, "\xef\xbb\xbf{}", `[true,false,null]`, `[-]`, `[-x]`,
	`[1.]`, `[1e]`, `{"a":-}`, `{"a":tx}`, `{"a":nul}`, `{"a":1x}`, `[1x]`, `{"a":"\u"}`, `["\`,
	`{"\`, `{"a`, `{"a"`, `{"a":`, `{"a":1`, `{"a":1,`, `[1`, `[1,`, `"\u00`, `"\u`, `1.5e`, `-1.5e-`,
	`{"":0}`, `{"a":{"b":{"c":[[[{}]]]}}}`, " [ 1 , { \"a\" : [ ] } , \"x\" ] ",
}

func TestJSONReaderSyntaxMatchesEncodingJSON(t *testing.T) {
	check := func(doc string) {
		t.Helper()
		raw, gerr := jtSyntaxOnly([]byte(doc))
		werr := jtStdSyntax([]byte(doc))
		if d := jtCheckErr(gerr, werr); d != "" {
			t.Errorf("document %q: %s", doc, d)
			return
		}
		if gerr == nil && string(raw) != strings.Trim(doc, " \t\r\n") {
			t.Errorf("document %q: RawValue = %q", doc, raw)
		}
	}
	for _, doc := range jtSyntaxDocs {
		check(doc)
		check("[" + doc + "]")
		check(`{"k":` + doc + `}`)
		check(`{"k":[` + doc + `]}`)
		check(doc + " ")
	}
}

func TestJSONReaderNesting(t *testing.T) {
	for _, n := range []int{1, 63, 64, 65, 127, 128, 200, 9999, 10000, 10001, 20000} {
		for _, open := range []string{"[", `{"a":`, "[{\"a\":"} {
			close := map[string]string{"[": "]", `{"a":`: "}", "[{\"a\":": "}]"}[open]
			docs := []string{
				strings.Repeat(open, n) + "1" + strings.Repeat(close, n),
				strings.Repeat(open, n) + "1" + strings.Repeat(close, n-1),
				strings.Repeat(open, n) + "1" + strings.Repeat(close, n) + "]",
				strings.Repeat(open, n),
			}
			for _, doc := range docs {
				_, gerr := jtSyntaxOnly([]byte(doc))
				if d := jtCheckErr(gerr, jtStdSyntax([]byte(doc))); d != "" {
					t.Errorf("depth %d %q: %s", n, open, d)
				}
				// The same inside a field of the test struct: the reader
				// counts the struct's own level.
				jtMustMatch(t, []byte(`{"raw":`+doc+`}`))
				jtMustMatch(t, []byte(`{"unknown":`+doc+`}`))
				jtMustMatch(t, []byte(`{"name":`+doc+`}`))
			}
		}
	}
	// Mismatched brackets at depth.
	doc := strings.Repeat("[", 70) + strings.Repeat("]", 69) + "}"
	_, gerr := jtSyntaxOnly([]byte(doc))
	if d := jtCheckErr(gerr, jtStdSyntax([]byte(doc))); d != "" {
		t.Error(d)
	}
}

// jtNumbers are number literals tried against every numeric field.
var jtNumbers = []string{
	"0", "-0", "1", "-1", "0.0", "-0.0", "1.0", "1.5", "-1.5", "1e2", "1E2", "1e-2", "1e+2", "100e-2",
	"127", "128", "-128", "-129", "255", "256", "32767", "32768", "-32768", "-32769", "65535", "65536",
	"2147483647", "2147483648", "-2147483648", "-2147483649", "4294967295", "4294967296",
	"9223372036854775807", "9223372036854775808", "-9223372036854775808", "-9223372036854775809",
	"18446744073709551615", "18446744073709551616", "-18446744073709551616", "99999999999999999999999",
	"00", "01", "+1", ".5", "1.", "-", "1e400", "-1e400", "1e-400", "-1e-400", "1e308", "1.8e308",
	"3.4028234663852886e38", "3.4028235e38", "3.4028236e38", "3.5e38", "1e39", "1e-46", "1.4e-45",
	"123456789012345678", "1234567890123456789", "12345678901234567890", "9007199254740993",
	"16777217", "-16777217", "999999999999999", "9999999999999999", "0.1", "0.30000000000000004",
	"2.2250738585072011e-308", "4.9e-324", "5e-324", "2e-324", "1" + strings.Repeat("0", 40),
	"0." + strings.Repeat("0", 40) + "1", "123456789012345678901234567890.5",
}

func TestJSONReaderNumbers(t *testing.T) {
	fields := []string{"i", "i8", "i16", "i32", "i64", "u", "u8", "u16", "u32", "u64", "f32", "f64", "name", "b", "data", "tags", "inner", "arr", "m", "raw"}
	for _, num := range jtNumbers {
		for _, f := range fields {
			jtMustMatch(t, []byte(`{"`+f+`":`+num+`}`))
			jtMustMatch(t, []byte(`{"`+f+`": `+num+` }`))
		}
		jtMustMatch(t, []byte(`{"arr":[`+num+`,`+num+`,`+num+`]}`))
		jtMustMatch(t, []byte(`{"m":{"x":`+num+`}}`))
		jtMustMatch(t, []byte(num))
	}
}

// jtStrings are JSON string literals (with their quotes) tried as values
// and as keys.
var jtStrings = []string{
	`""`, `"a"`, `"name"`, `"NAME"`, `"\u006eame"`, `"\n\t\r\b\f\/\\\""`, `"\u0000"`, `"\u001f"`,
	`"\u00e9"`, `"é"`, `"\u20ac"`, `"\ud83d\ude00"`, `"\uD83D\uDE00"`, `"\ud83d"`, `"\ude00"`,
	`"\ud83dx"`, `"\ud83d\u0041"`, `"\ud83d\ud83d\ude00"`, `"\ude00\ud83d"`, `"\ud83d\"`, `"\uDFFF\uDBFF"`,
	"\"\xff\"", "\"a\xffb\"", "\"\xc0\x80\"", "\"\xed\xa0\x80\"", "\"\xf4\x90\x80\x80\"", "\"\xe2\x82\"",
	"\"\xe2\x80\xa8\u2029\"", `"<>&"`, `"\u003c"`, "\"\x7f\"", `"日本語"`, `"a\u0308"`, `"\uFEFF"`,
	`"` + strings.Repeat("abcdefgh", 20) + `"`, `"` + strings.Repeat("x", 7) + `\n"`, `"\ufffd"`,
	"\"\xef\xbf\xbd\"", `"K"`, `"k"`, `"\u212a"`, `"ſx"`, `"SX"`, `"Ω"`, `"\u2126"`, `"ω"`, `"STRAẞE"`,
	`"STRASSE"`, `"plain"`, `"PLAIN"`, `"Plain"`, `"I8"`, `"F64"`, `"DATA"`, `"Inner"`, `"\u0069"`,
}

func TestJSONReaderStrings(t *testing.T) {
	for _, s := range jtStrings {
		for _, f := range []string{"name", "tags", "b", "i", "data", "at", "raw", "m", "inner"} {
			jtMustMatch(t, []byte(`{"`+f+`":`+s+`}`))
			jtMustMatch(t, []byte(`{"`+f+`":[`+s+`]}`))
		}
		jtMustMatch(t, []byte(`{`+s+`:"v"}`))
		jtMustMatch(t, []byte(`{`+s+`:1}`))
		jtMustMatch(t, []byte(`{`+s+`:{"a":"x"}}`))
		jtMustMatch(t, []byte(`{"inner":{`+s+`:7}}`))
		jtMustMatch(t, []byte(`{"m":{`+s+`:7}}`))
		jtMustMatch(t, []byte(s))
	}
}

// jtDocs are whole documents for the test struct.
var jtDocs = []string{
	`{}`, `null`, ` null `, `[]`, `"x"`, `1`, `true`, ``, ` `, `{"name":"a"}`, `{"name":"a","name":"b"}`,
	`{"name":null}`, `{"i":null,"b":null,"f64":null,"at":null,"data":null,"tags":null,"inner":null,"ptr":null,"m":null,"arr":null,"raw":null}`,
	`{"name":1}`, `{"name":true}`, `{"name":[]}`, `{"name":{}}`, `{"name":[1,{"a":"b"}]}`,
	`{"i":"1"}`, `{"i":true}`, `{"i":[1]}`, `{"i":{"a":1}}`, `{"b":1}`, `{"b":"true"}`, `{"b":[]}`,
	`{"i":1.5,"name":"after"}`, `{"i":"x","i8":300,"name":"after"}`, `{"i8":300,"i":"x"}`,
	`{"i":"x","name":}`, `{"i":"x"} x`, `{"i":"x",}`, `{"name":"a"`, `{"name":"a"}}`, `{"name":"a"} `,
	" \t\n\r{ \t\n\r\"name\" \t\n\r: \t\n\r\"a\" \t\n\r, \t\n\r\"i\" \t\n\r: \t\n\r1 \t\n\r} \t\n\r",
	`{"data":"AQID"}`, `{"data":""}`, `{"data":"AQI"}`, `{"data":"AQ=="}`, `{"data":"AQ="}`, `{"data":"A"}`,
	`{"data":"!!!!"}`, `{"data":"AQID\nBA=="}`, `{"data":"AQID\r\nBA=="}`, `{"data":"AQ\u003d\u003d"}`,
	`{"data":[1,2,3]}`, `{"data":[]}`, `{"data":[256]}`, `{"data":[-1]}`, `{"data":[1.5]}`, `{"data":["a"]}`,
	`{"data":[null,1]}`, `{"data":[[1]]}`, `{"data":1}`, `{"data":{}}`, `{"data":true}`, `{"data":"AQID","i":"x"}`,
	`{"data":"!!","i":"x"}`, `{"i":"x","data":"!!"}`,
	`{"at":"2006-01-02T15:04:05Z"}`, `{"at":"2006-01-02T15:04:05.999999999+07:00"}`, `{"at":"2006-01-02T15:04:05-00:30"}`,
	`{"at":"2006-01-02T15:04:05.1Z"}`, `{"at":"2006-01-02T15:04:05,1Z"}`, `{"at":"2006-01-02 15:04:05Z"}`,
	`{"at":"2006-01-02T15:04:05"}`, `{"at":"2006-01-02T15:04:05+24:00"}`, `{"at":"2006-01-02T15:04:05+23:60"}`,
	`{"at":"2006-02-30T15:04:05Z"}`, `{"at":"0000-01-01T00:00:00Z"}`, `{"at":"9999-12-31T23:59:59.999999999Z"}`,
	`{"at":"2006-01-02T5:04:05Z"}`, `{"at":"2006-01-02T15:04:05.Z"}`, `{"at":"2006-01-02T15:04:05.1234567891Z"}`,
	`{"at":"2006-01-02T15:04:05\u005a"}`, `{"at":"2006-01-02t15:04:05z"}`, `{"at":""}`, `{"at":1}`, `{"at":true}`,
	`{"at":[]}`, `{"at":{}}`, `{"at":"x","name":}`, `{"i":"x","at":"bad"}`, `{"at":"bad","i":"x"}`, `{"at":"bad"} x`,
	`{"tags":["a","b"]}`, `{"tags":[]}`, `{"tags":["a",1,"c"]}`, `{"tags":["a",null,"c"]}`, `{"tags":"a"}`,
	`{"tags":["a","b"],"tags":["c"]}`, `{"tags":["a","b"],"tags":["c",null,"d"]}`, `{"tags":[1,2],"tags":[null]}`,
	`{"inner":{"a":1,"s":"x","l":[1,2]}}`, `{"inner":{"a":"x"}}`, `{"inner":{"l":["x"]}}`, `{"inner":[]}`,
	`{"inner":5}`, `{"inner":{"A":1,"S":"x","L":[3]}}`, `{"inner":{"a":1},"inner":{"s":"y"}}`,
	`{"ptr":{"a":1}}`, `{"ptr":5}`, `{"ptr":"x"}`, `{"ptr":[]}`, `{"ptr":{"a":"x"}}`, `{"ptr":{"a":1},"ptr":null}`,
	`{"items":[{"a":1},{"s":"x"}]}`, `{"items":[1,{"a":2}]}`, `{"items":[]}`, `{"items":{}}`, `{"items":[{"l":[1,"x"]}]}`,
	`{"items":[{"a":1},{"a":2}],"items":[{"s":"x"}]}`, `{"items":[null,{"a":2}]}`,
	`{"raw":1}`, `{"raw":  {"a" : [1, 2] }  }`, `{"raw":null}`, `{"raw":"x\u0041"}`, `{"raw":[}`,
	`{"m":{"a":1,"b":"x","c":null}}`, `{"m":{}}`, `{"m":[]}`, `{"m":1}`, `{"m":{"a":1},"m":{"b":2}}`,
	`{"mi":{"1":"a","-128":"b"}}`, `{"mi":{"128":"a"}}`, `{"mi":{"x":"a","1":"b"}}`, `{"mi":{"01":"a"}}`,
	`{"mi":{"+1":"a"}}`, `{"mi":{" 1":"a"}}`, `{"mi":{"1":null}}`, `{"mi":{"\u0031":"a"}}`,
	`{"arr":[1,2]}`, `{"arr":[1]}`, `{"arr":[1,2,3,"x",{}]}`, `{"arr":[]}`, `{"arr":["x",2]}`, `{"arr":5}`,
	`{"arr":[1,2],"arr":[null]}`, `{"arr":[1,2],"arr":["x"]}`,
	`{"k":1}`, `{"K":1}`, `{"\u212a":1}`, `{"K":1}`, `{"k":1,"K":2}`, `{"K":2,"k":1}`, `{"\u212a":5,"K":2}`,
	`{"ſx":"a"}`, `{"SX":"a"}`, `{"Sx":"a"}`, `{"ſX":"a"}`, `{"Ω":"a"}`, `{"Ω":"a"}`, `{"ω":"a"}`,
	`{"straße":"a"}`, `{"STRASSE":"a"}`, `{"STRAẞE":"a"}`, `{"Straße":"a"}`, `{"plain":1}`, `{"PLAIN":1}`,
	`{"Plain":1}`, `{"NAME":"a"}`, `{"nAmE":"a"}`, `{"n\u0061me":"a"}`, `{"name\u0000":"a"}`, `{"NAMe":"a","name":"b"}`,
	`{"name":"b","NAME":"a"}`, `{"I8":5}`, `{"i\u0038":5}`, `{"inner":{"A":1}}`, "{\"nam\xffe\":1}", "{\"\xff\":1}",
	`{"unknown":[1,{"a":[true,false,null,"x\n"]}],"name":"a"}`, `{"unknown":}`, `{"unknown":[1,]}`,
	`{"f32":1e39}`, `{"f32":-1e39}`, `{"f32":3.4028235e38}`, `{"f64":1e400}`, `{"f32":1e-50}`, `{"f64":-0}`,
	`{"f32":-0}`, `{"f64":-0.0}`, `{"f32":16777217}`, `{"f64":9007199254740993}`, `{"f32":0.1}`,
	`{"u":-0}`, `{"u8":-0}`, `{"i":-0}`, `{"u64":-1}`, `{"u64":1e2}`, `{"i64":-9223372036854775808}`,
}

func TestJSONReaderDocuments(t *testing.T) {
	for _, doc := range jtDocs {
		jtMustMatch(t, []byte(doc))
	}
	// Every prefix of a document with everything in it.
	full := []byte(`{"name":"a\u00e9\n","i":-12,"i8":-128,"u64":18446744073709551615,"f32":1.5,"f64":-2.5e-10,` +
		`"b":true,"data":"AQID","at":"2006-01-02T15:04:05.5+01:00","tags":["x",null],"inner":{"a":1,"l":[1,2]},` +
		`"ptr":{"s":"p"},"items":[{"a":3}],"raw":{"z":[null]},"m":{"q":1},"mi":{"-1":"n"},"arr":[5,6],"K":1,"\u212a":2}`)
	jtMustMatch(t, full)
	for i := range full {
		jtMustMatch(t, full[:i])
	}
}

// jtGen generates random documents for the test struct.
type jtGen struct {
	rng *rand.Rand
	b   []byte
}

func (g *jtGen) pick(list ...string) string { return list[g.rng.Intn(len(list))] }

func (g *jtGen) ws() {
	for g.rng.Intn(5) == 0 {
		g.b = append(g.b, " \t\r\n"[g.rng.Intn(4)])
	}
}

func (g *jtGen) str() {
	g.b = append(g.b, '"')
	n := g.rng.Intn(12)
	for i := 0; i < n; i++ {
		switch g.rng.Intn(12) {
		case 0:
			g.b = append(g.b, g.pick(`\n`, `\t`, `\"`, `\\`, `\/`, `\b`, `\f`, `\r`, `\u00e9`, `\u0000`,
				`\ud83d\ude00`, `\ud800`, `\udc00`, `\uD834\uDD1E`, `\u2028`, `\u003c`)...)
		case 1:
			g.b = append(g.b, g.pick("é", "日", "😀", "\u2028", "<", ">", "&", "\xff", "\xc3", "\xed\xa0\x80", "\x7f")...)
		default:
			g.b = append(g.b, byte('a'+g.rng.Intn(26)))
		}
	}
	g.b = append(g.b, '"')
}

func (g *jtGen) num() {
	if g.rng.Intn(3) == 0 {
		g.b = append(g.b, jtNumbers[g.rng.Intn(len(jtNumbers))]...)
		return
	}
	switch g.rng.Intn(4) {
	case 0:
		g.b = strconv.AppendInt(g.b, g.rng.Int63n(300)-150, 10)
	case 1:
		g.b = strconv.AppendInt(g.b, int64(g.rng.Uint64()), 10)
	case 2:
		g.b = strconv.AppendFloat(g.b, g.rng.NormFloat64()*1e3, 'g', -1, 64)
	default:
		g.b = strconv.AppendFloat(g.b, g.rng.ExpFloat64()*1e30, 'e', -1, 64)
	}
}

// any appends a random value of any kind.
func (g *jtGen) any(depth int) {
	k := g.rng.Intn(8)
	if depth > 2 && k >= 6 {
		k = 0
	}
	switch k {
	case 0:
		g.b = append(g.b, g.pick("null", "true", "false")...)
	case 1, 2:
		g.num()
	case 3, 4, 5:
		g.str()
	case 6:
		g.b = append(g.b, '[')
		n := g.rng.Intn(4)
		for i := 0; i < n; i++ {
			if i > 0 {
				g.b = append(g.b, ',')
			}
			g.ws()
			g.any(depth + 1)
			g.ws()
		}
		g.b = append(g.b, ']')
	default:
		g.b = append(g.b, '{')
		n := g.rng.Intn(4)
		for i := 0; i < n; i++ {
			if i > 0 {
				g.b = append(g.b, ',')
			}
			g.ws()
			g.str()
			g.ws()
			g.b = append(g.b, ':')
			g.ws()
			g.any(depth + 1)
			g.ws()
		}
		g.b = append(g.b, '}')
	}
}

// key appends a key for name, sometimes in another case or escaped.
func (g *jtGen) key(name string) {
	switch g.rng.Intn(6) {
	case 0:
		name = strings.ToUpper(name)
	case 1:
		var sb strings.Builder
		for _, r := range name {
			if r == 'k' || r == 'K' {
				r = '\u212a'
			} else if r == 's' || r == 'S' {
				r = 'ſ'
			}
			sb.WriteRune(r)
		}
		name = sb.String()
	case 2:
		if name != "" {
			i := g.rng.Intn(len(name))
			if name[i] < utf8.RuneSelf {
				name = name[:i] + `\u00` + strconv.FormatInt(int64(name[i]), 16) + name[i+1:]
			}
		}
	}
	g.b = append(g.b, '"')
	g.b = append(g.b, name...)
	g.b = append(g.b, '"')
}

func (g *jtGen) inner(depth int) {
	g.b = append(g.b, '{')
	n := g.rng.Intn(4)
	for i := 0; i < n; i++ {
		if i > 0 {
			g.b = append(g.b, ',')
		}
		g.ws()
		name := g.pick("a", "s", "l", "x")
		g.key(name)
		g.ws()
		g.b = append(g.b, ':')
		g.ws()
		if g.rng.Intn(5) == 0 {
			g.any(depth + 1)
		} else {
			switch name {
			case "a":
				g.num()
			case "s":
				g.str()
			case "l":
				g.b = append(g.b, '[')
				for j := g.rng.Intn(4); j > 0; j-- {
					g.num()
					if j > 1 {
						g.b = append(g.b, ',')
					}
				}
				g.b = append(g.b, ']')
			default:
				g.any(depth + 1)
			}
		}
		g.ws()
	}
	g.b = append(g.b, '}')
}

func (g *jtGen) value(name string) {
	if g.rng.Intn(6) == 0 && name != "mi" && name != "data" {
		g.any(1)
		return
	}
	switch name {
	case "name", "sx", "ω", "straße":
		g.str()
	case "b":
		g.b = append(g.b, g.pick("true", "false", "null")...)
	case "data":
		switch g.rng.Intn(4) {
		case 0:
			g.b = append(g.b, g.pick(`"!!"`, `"AQI"`, `"AQ="`, `"A"`, `"AQID\nBA=="`, `null`, `"="`)...)
		case 1:
			g.b = append(g.b, '[')
			for j := g.rng.Intn(4); j > 0; j-- {
				g.b = strconv.AppendInt(g.b, int64(g.rng.Intn(256)), 10)
				if j > 1 {
					g.b = append(g.b, ',')
				}
			}
			g.b = append(g.b, ']')
		default:
			p := make([]byte, g.rng.Intn(10))
			g.rng.Read(p)
			g.b = append(g.b, '"')
			g.b = base64.StdEncoding.AppendEncode(g.b, p)
			g.b = append(g.b, '"')
		}
	case "at":
		if g.rng.Intn(3) == 0 {
			g.b = append(g.b, g.pick(`"2006-01-02T15:04:05Z"`, `"2006-01-02T15:04:05+24:00"`, `"bad"`, `"2006-02-30T15:04:05Z"`,
				`"2006-01-02T15:04:05.123456789-07:00"`, `"2006-01-02T5:04:05Z"`, `null`, `"2006-01-02T15:04:05,5Z"`)...)
		} else {
			tm := time.Unix(g.rng.Int63n(1e10)-2e9, g.rng.Int63n(1e9)).In(time.FixedZone("", (g.rng.Intn(48)-24)*1800))
			b, _ := tm.MarshalJSON()
			g.b = append(g.b, b...)
		}
	case "tags":
		g.b = append(g.b, '[')
		for j := g.rng.Intn(4); j > 0; j-- {
			if g.rng.Intn(6) == 0 {
				g.any(2)
			} else {
				g.str()
			}
			if j > 1 {
				g.b = append(g.b, ',')
			}
		}
		g.b = append(g.b, ']')
	case "inner", "ptr":
		g.inner(1)
	case "items":
		g.b = append(g.b, '[')
		for j := g.rng.Intn(3); j > 0; j-- {
			g.ws()
			g.inner(2)
			if j > 1 {
				g.b = append(g.b, ',')
			}
		}
		g.b = append(g.b, ']')
	case "raw":
		g.any(1)
	case "m":
		g.b = append(g.b, '{')
		for j := g.rng.Intn(4); j > 0; j-- {
			g.str()
			g.b = append(g.b, ':')
			if g.rng.Intn(4) == 0 {
				g.any(2)
			} else {
				g.num()
			}
			if j > 1 {
				g.b = append(g.b, ',')
			}
		}
		g.b = append(g.b, '}')
	case "mi":
		if g.rng.Intn(8) == 0 {
			g.b = append(g.b, "null"...)
			return
		}
		g.b = append(g.b, '{')
		for j := g.rng.Intn(4); j > 0; j-- {
			g.b = append(g.b, g.pick(`"1"`, `"-128"`, `"127"`, `"128"`, `"x"`, `"01"`, `"-0"`, `"1.0"`, `""`)...)
			g.b = append(g.b, ':')
			if g.rng.Intn(4) == 0 {
				g.b = append(g.b, "null"...)
			} else {
				g.str()
			}
			if j > 1 {
				g.b = append(g.b, ',')
			}
		}
		g.b = append(g.b, '}')
	case "arr":
		g.b = append(g.b, '[')
		for j := g.rng.Intn(4); j > 0; j-- {
			if g.rng.Intn(5) == 0 {
				g.any(2)
			} else {
				g.num()
			}
			if j > 1 {
				g.b = append(g.b, ',')
			}
		}
		g.b = append(g.b, ']')
	case "unknown":
		g.any(1)
	default: // integer and float fields, k, K, Plain
		g.num()
	}
}

func (g *jtGen) event() []byte {
	g.b = g.b[:0]
	g.ws()
	g.b = append(g.b, '{')
	n := g.rng.Intn(8)
	for i := 0; i < n; i++ {
		if i > 0 {
			g.b = append(g.b, ',')
		}
		g.ws()
		name := "unknown"
		if g.rng.Intn(8) != 0 {
			name = jtEventNames[g.rng.Intn(len(jtEventNames))]
		}
		g.key(name)
		g.ws()
		g.b = append(g.b, ':')
		g.ws()
		g.value(name)
		g.ws()
	}
	g.b = append(g.b, '}')
	g.ws()
	// Sometimes break it.
	if g.rng.Intn(5) == 0 && len(g.b) > 0 {
		i := g.rng.Intn(len(g.b))
		switch g.rng.Intn(4) {
		case 0:
			g.b = append(g.b[:i], g.b[i+1:]...)
		case 1:
			g.b = g.b[:i]
		case 2:
			g.b[i] = `{}[]:,"\ -+.0eE1ntfx`[g.rng.Intn(20)]
		default:
			g.b = append(g.b[:i], append([]byte{`{}[]:,"\ -`[g.rng.Intn(10)]}, g.b[i:]...)...)
		}
	}
	return g.b
}

func TestJSONReaderRandomDocuments(t *testing.T) {
	n := 20000
	if testing.Short() {
		n = 2000
	}
	g := &jtGen{rng: rand.New(rand.NewSource(1))}
	deadline := time.Now().Add(20 * time.Second)
	failures := 0
	for i := 0; i < n && time.Now().Before(deadline); i++ {
		doc := g.event()
		if d := jtCompare(doc); d != "" {
			t.Errorf("case %d, document %q:\n%s", i, doc, d)
			if failures++; failures > 10 {
				t.Fatal("too many failures")
			}
		}
		// The same bytes as a value of any type.
		_, gerr := jtSyntaxOnly(doc)
		if d := jtCheckErr(gerr, jtStdSyntax(doc)); d != "" {
			t.Errorf("case %d, syntax only, document %q:\n%s", i, doc, d)
		}
	}
}

// TestFoldJSONName checks the property encoding/json's foldName promises:
// two names fold alike exactly when bytes.EqualFold says they are equal.
func TestFoldJSONName(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"", ""}, {"abc", "ABC"}, {"ABC", "ABC"}, {"a_b-c1", "A_B-C1"}, {"\u212a", "K"}, {"ſ", "S"},
		{"k", "K"}, {"ß", "ß"}, {"ẞ", "ß"}, {"ω", "Ω"}, {"Ω", "Ω"}, {"\u2126", "Ω"}, {"é", "É"},
		{"\xff", "\ufffd"}, {"a\xffb", "A\ufffdB"}, {"µ", "µ"}, {"μ", "µ"}, {"ǅ", "Ǆ"},
	} {
		if got := string(FoldJSONName(nil, []byte(c.in))); got != c.want {
			t.Errorf("FoldJSONName(%q) = %q, want %q", c.in, got, c.want)
		}
	}
	if got := string(FoldJSONName([]byte("x:"), []byte("ab"))); got != "x:AB" {
		t.Errorf("FoldJSONName does not append: %q", got)
	}
	runes := []rune("aAkKsSzZ_-1\u212aſßẞωΩ\u2126µμǅǆǄéÉ\u0130\u0131iIİ\ufffd")
	rng := rand.New(rand.NewSource(2))
	randName := func() []byte {
		var b []byte
		for n := rng.Intn(4); n > 0; n-- {
			if rng.Intn(20) == 0 {
				b = append(b, 0xff)
				continue
			}
			b = utf8.AppendRune(b, runes[rng.Intn(len(runes))])
		}
		return b
	}
	for i := 0; i < 50000; i++ {
		x, y := randName(), randName()
		same := bytes.Equal(FoldJSONName(nil, x), FoldJSONName(nil, y))
		if same != bytes.EqualFold(x, y) && utf8.Valid(x) && utf8.Valid(y) {
			t.Fatalf("fold(%q)==fold(%q) is %v, EqualFold is %v", x, y, same, !same)
		}
	}
	// End to end: a key reaches the field encoding/json gives it.
	for _, k := range []string{"k", "K", "\u212a", "sx", "SX", "ſx", "ſX", "Sx", "ω", "Ω", "\u2126", "straße",
		"STRAßE", "STRAẞE", "STRASSE", "plain", "PLAIN", "Plain", "pLaIn", "ı8", "I8", "İ8", "\u0130"} {
		jtMustMatch(t, []byte(`{"`+k+`":"v"}`))
		jtMustMatch(t, []byte(`{"`+k+`":1}`))
	}
}

func TestJSONErrorText(t *testing.T) {
	var r JSONReader
	r.Reset([]byte(`{"a":x}`))
	r.BeginObject("Go value of type main.T")
	r.NextKey()
	r.Skip()
	err := r.Finish()
	if got, want := err.Error(), "json: invalid character 'x' looking for beginning of value (offset 6)"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	if !r.Failed() {
		t.Error("Failed() = false after a syntax error")
	}
	r.Reset([]byte(`{"index":"x","b":1}`))
	r.BeginObject("Go value of type main.Event")
	r.NextKey()
	r.Int("Go struct field Event.Index of type int64", 64)
	if r.Failed() {
		t.Error("Failed() after a type error")
	}
	r.NextKey()
	if v, ok := r.Int("x", 64); !ok || v != 1 {
		t.Errorf("reading did not continue after a type error: %v %v", v, ok)
	}
	r.NextKey()
	err = r.Finish()
	if got, want := err.Error(), "json: cannot unmarshal string into Go struct field Event.Index of type int64 (offset 12)"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	var je *JSONError
	if !errors.As(err, &je) || je.Syntax || je.Value != "string" || je.Offset != 12 {
		t.Errorf("bad fields: %#v", je)
	}
	// A later syntax error wins over an earlier type error.
	r.Reset([]byte(`{"index":"x","b":}`))
	r.BeginObject("T")
	r.NextKey()
	r.Int("Go struct field Event.Index of type int64", 64)
	r.NextKey()
	r.Int("x", 64)
	if err := r.Finish(); !strings.HasPrefix(err.Error(), "json: invalid character '}'") {
		t.Errorf("got %v", err)
	}
	// Fail stops reading, wraps its error, and yields to a later syntax
	// error.
	boom := errors.New("boom")
	r.Reset([]byte(`[1,2]`))
	r.BeginArray("T")
	r.NextElement()
	r.Int("T", 64)
	r.Fail(boom)
	if r.NextElement() || !errors.Is(r.Finish(), boom) || r.Finish().Error() != "json: boom (offset 2)" {
		t.Errorf("Fail: got %v", r.Err())
	}
	r.Reset([]byte(`[1,2}`))
	r.BeginArray("T")
	r.NextElement()
	r.Int("T", 64)
	r.Fail(boom)
	if err := r.Finish(); errors.Is(err, boom) || !strings.Contains(err.Error(), "after array element") {
		t.Errorf("Fail before a syntax error: got %v", err)
	}
	// A bad map key points just after its opening quote, though it is
	// recorded after the value.
	r.Reset([]byte(` {"x1":"a"}`))
	r.BeginObject("T")
	k, _ := r.NextKey()
	_, keyErr := ParseJSONIntKey(&r, k, 8, "Go value of type int8")
	r.Skip()
	r.KeyError(keyErr)
	r.NextKey()
	if got, want := r.Finish().Error(), "json: cannot unmarshal number x1 into Go value of type int8 (offset 3)"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	if err := (&JSONError{Offset: -1, Msg: "unsupported value: NaN"}).Error(); err != "json: unsupported value: NaN" {
		t.Errorf("got %q", err)
	}
}

// jtAllocDoc has no escapes: the reader must not allocate for it.
var jtAllocDoc = []byte(`{"name":"plain text","i":-12345,"u8":200,"f64":-1.25e-3,"f32":3.5,"b":true,"tags":["a","bc"],` +
	`"inner":{"a":1,"s":"é日本"},"unknown":[1,{"x":null}],"raw":{"q":[1,2]}}`)

func TestJSONReaderAllocs(t *testing.T) {
	var r JSONReader
	sink := 0
	allocs := testing.AllocsPerRun(100, func() {
		r.Reset(jtAllocDoc)
		r.BeginObject("T")
		for {
			k, ok := r.NextKey()
			if !ok {
				break
			}
			switch string(k) {
			case "name":
				s, _ := r.StringBytes("T")
				sink += len(s)
			case "i", "u8":
				v, _ := r.Int("T", 64)
				sink += int(v)
			case "f64", "f32":
				v, _ := r.Float("T", 64)
				sink += int(v)
			case "b":
				r.Bool("T")
			case "tags":
				r.BeginArray("T")
				for r.NextElement() {
					s, _ := r.StringBytes("T")
					sink += len(s)
				}
			case "raw":
				raw, _ := r.RawValue()
				sink += len(raw)
			default:
				r.Skip()
			}
		}
		if err := r.Finish(); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Errorf("reading a document without escapes allocated %v times", allocs)
	}
	// Escaped strings and keys use the reader's scratch buffer once it has
	// grown.
	esc := []byte(`{"n\u0061me":"a\nb\u00e9\ud83d\ude00 and more text"}`)
	allocs = testing.AllocsPerRun(100, func() {
		r.Reset(esc)
		r.BeginObject("T")
		r.NextKey()
		s, _ := r.StringBytes("T")
		sink += len(s)
		r.NextKey()
		r.Finish()
	})
	if allocs != 0 {
		t.Errorf("StringBytes with escapes allocated %v times", allocs)
	}
	// String allocates once: the result.
	for _, s := range []string{`"plain text value"`, `"esc\naped \u00e9 text"`, "\"bad \xff utf8\"",
		`"` + strings.Repeat(`long \u00e9scaped`, 30) + `"`} {
		doc := []byte(s)
		allocs = testing.AllocsPerRun(100, func() {
			r.Reset(doc)
			s, _ := r.String("T")
			sink += len(s)
		})
		if allocs != 1 {
			t.Errorf("String(%s) allocated %v times, want 1", doc, allocs)
		}
	}
	// Generated code uses a new reader per document: String still
	// allocates only its result, and StringBytes only the scratch buffer.
	escDoc := []byte(`"esc\naped \u00e9 text with \ud83d\ude00 and more"`)
	allocs = testing.AllocsPerRun(100, func() {
		var fresh JSONReader
		fresh.Reset(escDoc)
		s, _ := fresh.String("T")
		sink += len(s)
	})
	if allocs != 1 {
		t.Errorf("String on a new reader allocated %v times, want 1", allocs)
	}
	allocs = testing.AllocsPerRun(100, func() {
		var fresh JSONReader
		fresh.Reset(escDoc)
		s, _ := fresh.StringBytes("T")
		sink += len(s)
	})
	if allocs != 1 {
		t.Errorf("StringBytes on a new reader allocated %v times, want 1", allocs)
	}
	// Long numbers go through strconv.ParseFloat; up to 32 bytes the
	// string conversion stays on the stack.
	for _, num := range []string{"1.7976931348623157e308", "0.1000000000000000055511151231257827", "123456789012345678"} {
		doc := []byte(num)
		allocs = testing.AllocsPerRun(100, func() {
			r.Reset(doc)
			v, _ := r.Float("T", 64)
			sink += int(v)
		})
		if allocs != 0 && len(num) <= 32 {
			t.Errorf("Float(%s) allocated %v times", num, allocs)
		}
	}
	_ = sink
}

func TestJSONReaderStringBytesAliasesInput(t *testing.T) {
	doc := []byte(`{"key":"value"}`)
	var r JSONReader
	r.Reset(doc)
	r.BeginObject("T")
	k, _ := r.NextKey()
	v, _ := r.StringBytes("T")
	if &k[0] != &doc[2] || &v[0] != &doc[8] {
		t.Error("key or value without escapes was copied")
	}
}

func TestJSONReaderBytesResultIsNew(t *testing.T) {
	for _, doc := range []string{`""`, `[]`, `"AQID"`, `[1,2]`} {
		var r JSONReader
		r.Reset([]byte(doc))
		v, ok := r.Bytes("T")
		if !ok || v == nil {
			t.Errorf("Bytes(%s) = %v, %v; want a non-nil slice", doc, v, ok)
		}
	}
}

// TestJSONReaderFloatParsing checks Float (with its fast path) against
// strconv.ParseFloat, bit for bit, on random JSON numbers.
func TestJSONReaderFloatParsing(t *testing.T) {
	rng := rand.New(rand.NewSource(8))
	digits := func(n int) string {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte('0' + rng.Intn(10))
		}
		return string(b)
	}
	var r JSONReader
	for i := 0; i < 300000; i++ {
		var sb strings.Builder
		if rng.Intn(2) == 0 {
			sb.WriteByte('-')
		}
		intPart := digits(1 + rng.Intn(20))
		if len(intPart) > 1 && intPart[0] == '0' {
			intPart = intPart[1:]
			if intPart[0] == '0' {
				intPart = "0"
			}
		}
		sb.WriteString(intPart)
		if rng.Intn(2) == 0 {
			sb.WriteString("." + digits(1+rng.Intn(12)))
		}
		if rng.Intn(2) == 0 {
			sb.WriteString([]string{"e", "E", "e+", "e-", "E-"}[rng.Intn(5)])
			sb.WriteString(strconv.Itoa(rng.Intn([]int{12, 25, 40, 400}[rng.Intn(4)])))
		}
		num := sb.String()
		for _, bitSize := range []int{32, 64} {
			want, werr := strconv.ParseFloat(num, bitSize)
			r.Reset([]byte(num))
			got, ok := r.Float("T", bitSize)
			err := r.Finish()
			if (werr == nil) != ok || (werr == nil) != (err == nil) {
				t.Fatalf("Float(%s, %d) = %v, %v, %v; ParseFloat: %v", num, bitSize, got, ok, err, werr)
			}
			if ok && math.Float64bits(got) != math.Float64bits(want) {
				t.Fatalf("Float(%s, %d) = %v, ParseFloat = %v", num, bitSize, got, want)
			}
		}
	}
}

// TestJSONReaderRandomCalls makes random calls on random input, as a
// confused caller might: the reader must not panic, and after a syntax
// error every call must fail.
func TestJSONReaderRandomCalls(t *testing.T) {
	rng := rand.New(rand.NewSource(10))
	g := &jtGen{rng: rng}
	var r JSONReader
	for i := 0; i < 20000; i++ {
		doc := append([]byte(nil), g.event()...)
		if i%3 == 0 {
			doc = doc[:rng.Intn(len(doc)+1)]
		}
		r.Reset(doc)
		for k := 0; k < 40; k++ {
			failed := r.Failed()
			var ok bool
			switch rng.Intn(17) {
			case 0:
				ok = r.Null()
			case 1:
				ok = r.BeginObject("T")
			case 2:
				_, ok = r.NextKey()
			case 3:
				ok = r.BeginArray("T")
			case 4:
				ok = r.NextElement()
			case 5:
				r.Skip()
			case 6:
				_, ok = r.RawValue()
			case 7:
				_, ok = r.String("T")
			case 8:
				_, ok = r.StringBytes("T")
			case 9:
				_, ok = r.Bool("T")
			case 10:
				_, ok = r.Int("T", []int{0, 8, 16, 32, 64, 65, -1}[rng.Intn(7)])
			case 11:
				_, ok = r.Uint("T", []int{0, 8, 16, 32, 64, 65, -1}[rng.Intn(7)])
			case 12:
				_, ok = r.Float("T", []int{32, 64, 0}[rng.Intn(3)])
			case 13:
				_, ok = r.Bytes("T")
			case 14:
				_, ok = r.Time("T")
			case 15:
				r.KeyError(&JSONError{Offset: 1, Value: "string", Target: "T"})
			default:
				if rng.Intn(10) == 0 {
					r.Fail(errors.New("boom"))
				}
			}
			if failed && ok {
				t.Fatalf("a call succeeded after a syntax error, document %q", doc)
			}
		}
		if err := r.Finish(); err != nil && r.Err() != err {
			t.Fatal("Finish and Err disagree")
		}
	}
}
