package dataset

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/hir-ads/hir/graph"
)

// MaxLineBytes bounds the length of one JSON Lines record.
const MaxLineBytes = 64 << 20

// File names of a data set directory.
const (
	EntitiesFile = "entities.jsonl"
	EventsFile   = "events.jsonl"
	TruthFile    = "truth.json"
)

// LineReader reads the non-blank lines of a JSON Lines stream. Lines may be up
// to MaxLineBytes long; a trailing "\r" is dropped. Not safe for concurrent use.
type LineReader struct {
	r    *bufio.Reader
	buf  []byte
	line []byte
	n    int
	err  error
	name string
}

// NewLineReader returns a LineReader over r; name is used in errors.
func NewLineReader(r io.Reader, name string) *LineReader {
	return &LineReader{r: bufio.NewReaderSize(r, 64<<10), name: name}
}

// Next advances to the next non-blank line. It returns false at the end of the
// stream or on an error, which Err then reports.
func (lr *LineReader) Next() bool {
	for lr.err == nil {
		line, err := lr.readLine()
		if err != nil {
			lr.err = err // io.EOF after a last unterminated line: deliver it first
			if len(line) == 0 {
				return false
			}
		}
		lr.n++
		line = bytes.TrimRight(line, "\r\n")
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		lr.line = line
		return true
	}
	return false
}

func (lr *LineReader) readLine() ([]byte, error) {
	line, err := lr.r.ReadSlice('\n')
	if !errors.Is(err, bufio.ErrBufferFull) {
		return line, err
	}
	lr.buf = append(lr.buf[:0], line...)
	for {
		line, err = lr.r.ReadSlice('\n')
		lr.buf = append(lr.buf, line...)
		if len(lr.buf) > MaxLineBytes {
			return nil, &LineError{File: lr.name, Line: lr.n + 1, Err: ErrLineTooLong}
		}
		if !errors.Is(err, bufio.ErrBufferFull) {
			return lr.buf, err
		}
	}
}

// Bytes returns the current line without its line terminator. The slice is
// valid until the next call to Next.
func (lr *LineReader) Bytes() []byte { return lr.line }

// Line returns the 1-based number of the current line.
func (lr *LineReader) Line() int { return lr.n }

// Err returns the first read error, or nil at a clean end of stream.
func (lr *LineReader) Err() error {
	if errors.Is(lr.err, io.EOF) {
		return nil
	}
	return lr.err
}

// Kind says what a JSON Lines stream holds.
type Kind uint8

// Kinds of JSON Lines streams.
const (
	// KindAuto decides per line: a record with a "src" key is an event.
	KindAuto Kind = iota
	KindEntities
	KindEvents
)

// kindOf guesses the kind of a .jsonl file from its name.
func kindOf(path string) Kind {
	base := strings.ToLower(filepath.Base(path))
	switch {
	case strings.HasPrefix(base, "entit"):
		return KindEntities
	case strings.HasPrefix(base, "event"):
		return KindEvents
	}
	return KindAuto
}

// ReadJSONL decodes a JSON Lines stream of the given kind into sink, line by
// line, in constant memory. name is the file name used in errors: a decoding,
// validation or sink error is returned as a *LineError.
func ReadJSONL(ctx context.Context, r io.Reader, name string, kind Kind, sink Sink) error {
	lr := NewLineReader(r, name)
	for lr.Next() {
		if lr.Line()%4096 == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		line := lr.Bytes()
		k := kind
		if k == KindAuto {
			k = sniffKind(line)
		}
		var err error
		if k == KindEvents {
			var ev graph.Event
			if err = json.Unmarshal(line, &ev); err == nil {
				err = sink.Event(&ev)
			} else {
				err = refContext(line, err)
			}
		} else {
			var e graph.Entity
			if err = json.Unmarshal(line, &e); err == nil {
				err = sink.Entity(&e)
			}
		}
		if err != nil {
			return &LineError{File: name, Line: lr.Line(), Err: err}
		}
	}
	if err := lr.Err(); err != nil {
		var le *LineError
		if errors.As(err, &le) {
			return err
		}
		return &LineError{File: name, Line: lr.Line() + 1, Err: fmt.Errorf("read line: %w", err)}
	}
	return nil
}

// refContext prefixes err with "src: " or "dst: " when it is the error of
// decoding that endpoint of an event line; graph.Event.UnmarshalJSON returns
// endpoint decoding errors without saying which endpoint failed.
func refContext(line []byte, err error) error {
	var raw struct {
		Src json.RawMessage `json:"src"`
		Dst json.RawMessage `json:"dst"`
	}
	if json.Unmarshal(line, &raw) != nil {
		return err
	}
	for _, side := range []struct {
		name string
		raw  json.RawMessage
	}{{"src", raw.Src}, {"dst", raw.Dst}} {
		var ref graph.Ref
		if side.raw == nil {
			continue
		}
		if rerr := json.Unmarshal(side.raw, &ref); rerr != nil && rerr.Error() == err.Error() {
			return fmt.Errorf("%s: %w", side.name, err)
		}
	}
	return err
}

// sniffKind reports KindEvents when the top-level object has a "src" key.
func sniffKind(line []byte) Kind {
	var probe struct {
		Src json.RawMessage `json:"src"`
	}
	if json.Unmarshal(line, &probe) == nil && probe.Src != nil {
		return KindEvents
	}
	return KindEntities
}

// openMaybeGzip opens path, decompressing it when the name ends in ".gz".
func openMaybeGzip(path string) (io.ReadCloser, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	if !strings.HasSuffix(path, ".gz") {
		return f, nil
	}
	zr, err := gzip.NewReader(f)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("open gzip %s: %w", path, err)
	}
	return gzipFile{zr, f}, nil
}

type gzipFile struct {
	*gzip.Reader
	f *os.File
}

func (g gzipFile) Close() error {
	err := g.Reader.Close()
	if cerr := g.f.Close(); err == nil {
		err = cerr
	}
	return err
}

// importJSONL reads a data set directory or a single JSON Lines file.
func importJSONL(ctx context.Context, src string, sink Sink) (Summary, error) {
	st, err := os.Stat(src)
	if err != nil {
		return Summary{}, fmt.Errorf("open jsonl source: %w", err)
	}
	type file struct {
		path string
		kind Kind
	}
	var files []file
	if st.IsDir() {
		for _, name := range []string{EntitiesFile, EventsFile} {
			for _, cand := range []string{name, name + ".gz"} {
				p := filepath.Join(src, cand)
				if _, err := os.Stat(p); err == nil {
					files = append(files, file{p, kindOf(cand)})
					break
				}
			}
		}
		if len(files) == 0 {
			return Summary{}, fmt.Errorf("open jsonl source %s: %w: no %s or %s", src, ErrNoData, EntitiesFile, EventsFile)
		}
	} else {
		files = append(files, file{src, kindOf(src)})
	}
	for _, f := range files {
		rc, err := openMaybeGzip(f.path)
		if err != nil {
			return Summary{}, fmt.Errorf("open jsonl file: %w", err)
		}
		err = ReadJSONL(ctx, rc, filepath.Base(f.path), f.kind, sink)
		rc.Close()
		if err != nil {
			return Summary{}, err
		}
	}
	return Summary{}, nil
}

// AppendEntity appends the JSON encoding of e (one line, no newline) to dst.
// Attributes are written in key order, so the encoding is deterministic. The
// result decodes with graph.Entity.UnmarshalJSON to an equal entity.
func AppendEntity(dst []byte, e *graph.Entity) []byte {
	dst = append(dst, `{"type":`...)
	dst = appendString(dst, e.Type.String())
	dst = append(dst, `,"id":`...)
	dst = appendString(dst, e.ID)
	if e.Text != "" {
		dst = append(dst, `,"text":`...)
		dst = appendString(dst, e.Text)
	}
	if len(e.Attrs) > 0 {
		keys := make([]string, 0, len(e.Attrs))
		for k := range e.Attrs {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		dst = append(dst, `,"attrs":{`...)
		for i, k := range keys {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = appendString(dst, k)
			dst = append(dst, ':')
			dst = appendString(dst, e.Attrs[k])
		}
		dst = append(dst, '}')
	}
	if len(e.Vector) > 0 {
		dst = append(dst, `,"vector":[`...)
		for i, v := range e.Vector {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = strconv.AppendFloat(dst, float64(v), 'g', -1, 32)
		}
		dst = append(dst, ']')
	}
	return append(dst, '}')
}

// AppendEvent appends the JSON encoding of ev (one line, no newline) to dst.
// The result decodes with graph.Event.UnmarshalJSON to an equal event.
func AppendEvent(dst []byte, ev *graph.Event) []byte {
	dst = append(dst, '{')
	if ev.ID != "" {
		dst = append(dst, `"id":`...)
		dst = appendString(dst, ev.ID)
		dst = append(dst, ',')
	}
	dst = append(dst, `"src":`...)
	dst = appendRef(dst, ev.Src)
	dst = append(dst, `,"dst":`...)
	dst = appendRef(dst, ev.Dst)
	dst = append(dst, `,"type":`...)
	dst = appendString(dst, ev.Type.String())
	dst = append(dst, `,"ts":`...)
	dst = strconv.AppendInt(dst, ev.TS, 10)
	dst = append(dst, `,"weight":`...)
	dst = strconv.AppendFloat(dst, float64(ev.Weight), 'g', -1, 32)
	return append(dst, '}')
}

func appendRef(dst []byte, r graph.Ref) []byte {
	dst = append(dst, `{"type":`...)
	dst = appendString(dst, r.Type.String())
	dst = append(dst, `,"id":`...)
	dst = appendString(dst, r.ID)
	return append(dst, '}')
}

const hexDigits = "0123456789abcdef"

// appendString appends s as a JSON string. Invalid UTF-8 becomes U+FFFD, as
// with encoding/json.
func appendString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch c {
			case '"', '\\':
				dst = append(dst, '\\', c)
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
			i++
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
			i += size
			start = i
			continue
		}
		i += size
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// Writer is a Sink that writes a data set directory (entities.jsonl and
// events.jsonl) that Import reads back with format "jsonl". Not safe for
// concurrent use; Close must be called to flush the files.
type Writer struct {
	dir      string
	files    [2]*os.File
	bufs     [2]*bufio.Writer
	scratch  []byte
	closed   bool
	firstErr error
}

// NewWriter creates dir if needed and truncates its entities.jsonl and
// events.jsonl.
func NewWriter(dir string) (*Writer, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("create data set directory: %w", err)
	}
	w := &Writer{dir: dir}
	for i, name := range []string{EntitiesFile, EventsFile} {
		f, err := os.Create(filepath.Join(dir, name))
		if err != nil {
			w.Close()
			return nil, fmt.Errorf("create %s: %w", name, err)
		}
		w.files[i] = f
		w.bufs[i] = bufio.NewWriterSize(f, 1<<20)
	}
	return w, nil
}

// Entity writes one entities.jsonl line.
func (w *Writer) Entity(e *graph.Entity) error {
	return w.write(0, AppendEntity(w.scratch[:0], e))
}

// Event writes one events.jsonl line.
func (w *Writer) Event(ev *graph.Event) error {
	return w.write(1, AppendEvent(w.scratch[:0], ev))
}

func (w *Writer) write(i int, b []byte) error {
	if w.closed {
		return ErrClosed
	}
	w.scratch = append(b, '\n')
	if _, err := w.bufs[i].Write(w.scratch); err != nil {
		return fmt.Errorf("write %s: %w", filepath.Base(w.files[i].Name()), err)
	}
	return nil
}

// Close flushes and closes both files.
func (w *Writer) Close() error {
	if w.closed {
		return w.firstErr
	}
	w.closed = true
	for i, f := range w.files {
		if f == nil {
			continue
		}
		if err := w.bufs[i].Flush(); err != nil && w.firstErr == nil {
			w.firstErr = fmt.Errorf("flush %s: %w", filepath.Base(f.Name()), err)
		}
		if err := f.Close(); err != nil && w.firstErr == nil {
			w.firstErr = fmt.Errorf("close %s: %w", filepath.Base(f.Name()), err)
		}
	}
	return w.firstErr
}
