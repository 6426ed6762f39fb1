package client

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
)

// benchEntry appends one realistic list entry: a dozen fields with nested
// objects, arrays, escapes and long strings.
func benchEntry(b []byte, id int, rng *rand.Rand) []byte {
	word := func() string {
		words := []string{"alpha", "beta", "gamma", "delta", "production", "staging", "eu-west", "us-east", "canary", "blue", "green"}
		return words[rng.IntN(len(words))]
	}
	var desc strings.Builder
	for desc.Len() < 150 {
		desc.WriteString(word())
		desc.WriteByte(' ')
	}
	b = fmt.Appendf(b, `{"id":%d,"name":"%s-%s-%d","slug":"%s-%d",`, id, word(), word(), id, word(), id)
	b = fmt.Appendf(b, `"description":"%s \"quoted\" caf\u00e9 \u2713",`, desc.String())
	b = fmt.Appendf(b, `"created_at":"2024-%02d-%02dT%02d:%02d:%02d.123456Z","updated_at":"2025-01-02T03:04:05Z",`,
		1+rng.IntN(12), 1+rng.IntN(28), rng.IntN(24), rng.IntN(60), rng.IntN(60))
	b = fmt.Appendf(b, `"owner":{"id":%d,"username":"%s%d","email":"%s%d@example.com","is_staff":%t},`,
		rng.IntN(1000), word(), rng.IntN(100), word(), rng.IntN(100), rng.IntN(2) == 0)
	b = fmt.Appendf(b, `"tags":["%s","%s","%s"],"counts":[%d,%d,%d,%d],`, word(), word(), word(),
		rng.IntN(100), rng.IntN(1000), rng.IntN(10000), -rng.IntN(10))
	b = fmt.Appendf(b, `"settings":{"replicas":%d,"strategy":{"type":"RollingUpdate","max_surge":"25%%","limits":{"cpu":%.3f,"memory":"%dMi"}},"env":[{"name":"MODE","value":"%s"},{"name":"DEBUG","value":null}]},`,
		1+rng.IntN(9), rng.Float64()*4, 128<<rng.IntN(5), word())
	b = fmt.Appendf(b, `"region":"%s","enabled":%t,"score":%g,"url":"https://deploy.example.com/api/projects/projects/%d/","archived_at":null}`,
		word(), rng.IntN(2) == 0, rng.Float64()*1e3, id)
	return b
}

// benchBody returns a plain list of n entries, or an envelope around it.
func benchBody(n int, envelope bool) []byte {
	rng := rand.New(rand.NewPCG(1, uint64(n)))
	var b []byte
	if envelope {
		b = fmt.Appendf(b, `{"count":%d,"next":"https://deploy.example.com/api/projects/projects/?page=2","previous":null,"results":`, n*3)
	}
	b = append(b, '[')
	for i := range n {
		if i > 0 {
			b = append(b, ',', '\n')
		}
		b = benchEntry(b, i+1, rng)
	}
	b = append(b, ']')
	if envelope {
		b = append(b, '}')
	}
	return b
}

func TestBenchBodyIsValid(t *testing.T) {
	for _, envelope := range []bool{false, true} {
		body := benchBody(50, envelope)
		page, err := decodeListPage(bytes.NewReader(body), 10)
		if err != nil || page.Entries != 50 || len(page.IDs) != 10 || page.IDs[9] != 10 {
			t.Fatalf("envelope=%t: %+v, %v", envelope, page, err)
		}
		ref, err := referenceListPage(body, 10)
		if err != nil || !samePage(page, ref) {
			t.Fatalf("envelope=%t: reference %+v, %v", envelope, ref, err)
		}
	}
}

// BenchmarkDecodeList compares the scanner with the naive decoding into
// maps on the same bodies.
func BenchmarkDecodeList(b *testing.B) {
	for _, shape := range []string{"plain", "envelope"} {
		for _, n := range []int{1_000, 10_000, 100_000} {
			body := benchBody(n, shape == "envelope")
			name := shape + "/" + strconv.Itoa(n/1000) + "k"
			b.Run(name+"/scanner", func(b *testing.B) {
				b.SetBytes(int64(len(body)))
				b.ReportAllocs()
				for b.Loop() {
					page, err := decodeListPage(bytes.NewReader(body), 10)
					if err != nil || page.Entries != n {
						b.Fatalf("%+v, %v", page, err)
					}
				}
			})
			b.Run(name+"/naive", func(b *testing.B) {
				b.SetBytes(int64(len(body)))
				b.ReportAllocs()
				for b.Loop() {
					if shape == "envelope" {
						var v map[string]any
						if err := json.Unmarshal(body, &v); err != nil {
							b.Fatal(err)
						}
					} else {
						var v []map[string]any
						if err := json.Unmarshal(body, &v); err != nil {
							b.Fatal(err)
						}
					}
				}
			})
		}
	}
}

func BenchmarkDecodeObject(b *testing.B) {
	body := benchBody(1, false)
	body = body[1 : len(body)-1]
	fields := []string{"name", "region", "enabled", "score"}
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := decodeObject(bytes.NewReader(body), fields, nil); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkGunzipDecode measures how the client reads a gzip answer:
// the standard library's decompressor, pooled, under the scanner, on the
// 100k-entry plain list of BenchmarkDecodeList compressed at gzip's default
// level. MB/s are of decompressed bytes, so they compare with
// BenchmarkDecodeList/plain/100k/scanner; BENCHMARKS.md compares the
// decompressor with github.com/klauspost/compress's.
func BenchmarkGunzipDecode(b *testing.B) {
	body := benchBody(100_000, false)
	z := gzipBytes(b, string(body))
	b.Run("100k/stdlib", func(b *testing.B) {
		b.SetBytes(int64(len(body)))
		b.ReportAllocs()
		for b.Loop() {
			zr, err := newGunzipReader(&limitedReader{r: bytes.NewReader(z), n: 1 << 31})
			if err != nil {
				b.Fatal(err)
			}
			page, err := decodeListPage(&limitedReader{r: zr, n: 1 << 30}, 10)
			zr.release()
			if err != nil || page.Entries != 100_000 {
				b.Fatalf("%+v, %v", page, err)
			}
		}
		b.ReportMetric(float64(len(body))/float64(len(z)), "x-compression")
	})
}
