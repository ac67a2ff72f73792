package dataset

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/hir-ads/hir/graph"
)

// MovieLens-100K file names.
const (
	mlUsers   = "u.user"
	mlItems   = "u.item"
	mlRatings = "u.data"
	mlGenres  = "u.genre"
)

// eachLine calls fn for every non-blank line of the file at path, with its
// 1-based number; errors from fn are wrapped in a *LineError. The line slice is
// only valid during the call.
func eachLine(ctx context.Context, path string, fn func(line []byte) error) error {
	rc, err := openMaybeGzip(path)
	if err != nil {
		return fmt.Errorf("open source file: %w", err)
	}
	defer rc.Close()
	name := filepath.Base(path)
	lr := NewLineReader(rc, name)
	for lr.Next() {
		if lr.Line()%4096 == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		if err := fn(lr.Bytes()); err != nil {
			return &LineError{File: name, Line: lr.Line(), Err: err}
		}
	}
	if err := lr.Err(); err != nil {
		return fmt.Errorf("read %s: %w", name, err)
	}
	return nil
}

// latin1 converts ISO 8859-1 bytes to a UTF-8 string; valid ASCII is returned
// unchanged.
func latin1(b []byte) string {
	ascii := true
	for _, c := range b {
		if c >= utf8.RuneSelf {
			ascii = false
			break
		}
	}
	if ascii {
		return string(b)
	}
	out := make([]byte, 0, len(b)+8)
	for _, c := range b {
		out = utf8.AppendRune(out, rune(c))
	}
	return string(out)
}

func badRecord(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrBadRecord}, args...)...)
}

func splitN(line []byte, sep byte, n int) ([][]byte, error) {
	f := bytes.Split(line, []byte{sep})
	if len(f) != n {
		return nil, badRecord("got %d %q-separated fields, want %d", len(f), sep, n)
	}
	return f, nil
}

func parseUint(field []byte, what string) (uint64, error) {
	v, err := strconv.ParseUint(string(bytes.TrimSpace(field)), 10, 64)
	if err != nil {
		return 0, badRecord("%s %q is not a non-negative integer", what, field)
	}
	return v, nil
}

type mlRating struct {
	ts         int64 // unix ms
	user, item uint32
	rating     uint8
}

// importMovieLens imports a MovieLens-100K directory.
func importMovieLens(ctx context.Context, dir string, sink Sink) (Summary, error) {
	for _, name := range []string{mlUsers, mlItems, mlRatings, mlGenres} {
		if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
			return Summary{}, fmt.Errorf("open movielens source: %w: %w", ErrNoData, err)
		}
	}

	// Genres: "name|index".
	var genres []string
	err := eachLine(ctx, filepath.Join(dir, mlGenres), func(line []byte) error {
		f, err := splitN(line, '|', 2)
		if err != nil {
			return err
		}
		idx, err := parseUint(f[1], "genre index")
		if err != nil {
			return err
		}
		if int(idx) != len(genres) {
			return badRecord("genre index %d out of order, want %d", idx, len(genres))
		}
		genres = append(genres, latin1(f[0]))
		return nil
	})
	if err != nil {
		return Summary{}, err
	}
	if len(genres) == 0 {
		return Summary{}, fmt.Errorf("read %s: %w: no genres", mlGenres, ErrNoData)
	}

	// Ratings: "user\titem\trating\tts", kept to sort by time and to find each
	// movie's first rating.
	var ratings []mlRating
	firstTS := map[uint32]int64{}
	err = eachLine(ctx, filepath.Join(dir, mlRatings), func(line []byte) error {
		f := bytes.Fields(line)
		if len(f) != 4 {
			return badRecord("got %d whitespace-separated fields, want 4 (user item rating ts)", len(f))
		}
		user, err := parseUint(f[0], "user id")
		if err != nil {
			return err
		}
		item, err := parseUint(f[1], "item id")
		if err != nil {
			return err
		}
		rating, err := parseUint(f[2], "rating")
		if err != nil {
			return err
		}
		if rating < 1 || rating > 5 {
			return badRecord("rating %d outside 1..5", rating)
		}
		sec, err := parseUint(f[3], "timestamp")
		if err != nil {
			return err
		}
		if user > 1<<31 || item > 1<<31 || sec > 1<<40 {
			return badRecord("value out of range")
		}
		r := mlRating{ts: int64(sec) * 1000, user: uint32(user), item: uint32(item), rating: uint8(rating)}
		ratings = append(ratings, r)
		if t, ok := firstTS[r.item]; !ok || r.ts < t {
			firstTS[r.item] = r.ts
		}
		return nil
	})
	if err != nil {
		return Summary{}, err
	}
	var minTS int64
	for i, r := range ratings {
		if i == 0 || r.ts < minTS {
			minTS = r.ts
		}
	}

	for i, g := range genres {
		if err := sink.Entity(&graph.Entity{Type: graph.NodeCategory, ID: "g" + strconv.Itoa(i), Text: g}); err != nil {
			return Summary{}, fmt.Errorf("emit genre %q: %w", g, err)
		}
	}

	// Users: "id|age|gender|occupation|zip".
	err = eachLine(ctx, filepath.Join(dir, mlUsers), func(line []byte) error {
		f, err := splitN(line, '|', 5)
		if err != nil {
			return err
		}
		id, err := parseUint(f[0], "user id")
		if err != nil {
			return err
		}
		occ := latin1(f[3])
		e := graph.Entity{Type: graph.NodeUser, ID: "u" + strconv.FormatUint(id, 10), Text: occ, Attrs: map[string]string{
			"age": latin1(f[1]), "gender": latin1(f[2]), "occupation": occ, "zip": latin1(f[4]),
		}}
		return sink.Entity(&e)
	})
	if err != nil {
		return Summary{}, err
	}

	// Movies: "id|title|release|video release|url|19 genre flags".
	type membership struct {
		item  uint32
		genre int
		ts    int64
	}
	var members []membership
	err = eachLine(ctx, filepath.Join(dir, mlItems), func(line []byte) error {
		f, err := splitN(line, '|', 5+len(genres))
		if err != nil {
			return err
		}
		id, err := parseUint(f[0], "movie id")
		if err != nil {
			return err
		}
		if id > 1<<31 {
			return badRecord("movie id %d out of range", id)
		}
		title := latin1(f[1])
		var names []string
		for g, flag := range f[5:] {
			switch string(bytes.TrimSpace(flag)) {
			case "0":
			case "1":
				names = append(names, genres[g])
				ts, ok := firstTS[uint32(id)]
				if !ok {
					ts = minTS
				}
				members = append(members, membership{item: uint32(id), genre: g, ts: ts})
			default:
				return badRecord("genre flag %q is not 0 or 1", flag)
			}
		}
		attrs := map[string]string{"genres": strings.Join(names, "|")}
		if y := movieYear(title, string(f[2])); y != "" {
			attrs["year"] = y
		}
		if rd := latin1(f[2]); rd != "" {
			attrs["release_date"] = rd
		}
		text := title
		if len(names) > 0 {
			text += " | " + strings.Join(names, ", ")
		}
		e := graph.Entity{Type: graph.NodeAd, ID: "m" + strconv.FormatUint(id, 10), Text: text, Attrs: attrs}
		return sink.Entity(&e)
	})
	if err != nil {
		return Summary{}, err
	}

	// Events in time order: a movie's genre edges come at its first rating,
	// before the rating itself.
	slices.SortFunc(members, func(a, b membership) int {
		return cmp.Or(cmp.Compare(a.ts, b.ts), cmp.Compare(a.item, b.item), cmp.Compare(a.genre, b.genre))
	})
	slices.SortFunc(ratings, func(a, b mlRating) int {
		return cmp.Or(cmp.Compare(a.ts, b.ts), cmp.Compare(a.user, b.user), cmp.Compare(a.item, b.item))
	})
	var ev graph.Event
	var idBuf []byte
	mi := 0
	emitMembers := func(upTo int64) error {
		for ; mi < len(members) && members[mi].ts <= upTo; mi++ {
			m := members[mi]
			item := strconv.FormatUint(uint64(m.item), 10)
			ev = graph.Event{
				ID:     "mg" + item + "-" + strconv.Itoa(m.genre),
				Src:    graph.Ref{Type: graph.NodeAd, ID: "m" + item},
				Dst:    graph.Ref{Type: graph.NodeCategory, ID: "g" + strconv.Itoa(m.genre)},
				Type:   graph.EdgeInCategory,
				TS:     m.ts,
				Weight: 1,
			}
			if err := sink.Event(&ev); err != nil {
				return fmt.Errorf("emit %s in_category: %w", ev.Src, err)
			}
		}
		return nil
	}
	for i, r := range ratings {
		if i%4096 == 0 {
			if err := ctx.Err(); err != nil {
				return Summary{}, err
			}
		}
		if err := emitMembers(r.ts); err != nil {
			return Summary{}, err
		}
		t := graph.EdgeImpression
		switch {
		case r.rating >= 4:
			t = graph.EdgeClick
		case r.rating <= 2:
			t = graph.EdgeNotInterested
		}
		idBuf = append(idBuf[:0], 'r')
		idBuf = strconv.AppendUint(idBuf, uint64(r.user), 10)
		idBuf = append(idBuf, '-')
		idBuf = strconv.AppendUint(idBuf, uint64(r.item), 10)
		ev = graph.Event{
			ID:     string(idBuf),
			Src:    graph.Ref{Type: graph.NodeUser, ID: "u" + strconv.FormatUint(uint64(r.user), 10)},
			Dst:    graph.Ref{Type: graph.NodeAd, ID: "m" + strconv.FormatUint(uint64(r.item), 10)},
			Type:   t,
			TS:     r.ts,
			Weight: 1,
		}
		if err := ev.Validate(); err != nil {
			return Summary{}, fmt.Errorf("emit rating %s: %w", ev.ID, err)
		}
		if err := sink.Event(&ev); err != nil {
			return Summary{}, fmt.Errorf("emit rating %s: %w", ev.ID, err)
		}
	}
	if err := emitMembers(1<<62 - 1); err != nil {
		return Summary{}, err
	}
	return Summary{Ratings: len(ratings)}, nil
}

// movieYear returns the year in a title's trailing "(YYYY)", else the year of
// a "DD-Mon-YYYY" release date, else "".
func movieYear(title, release string) string {
	t := strings.TrimSpace(title)
	if n := len(t); n >= 6 && t[n-1] == ')' && t[n-6] == '(' {
		if y := t[n-5 : n-1]; isDigits(y) {
			return y
		}
	}
	if n := len(release); n >= 4 && isDigits(release[n-4:]) {
		return release[n-4:]
	}
	return ""
}

func isDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}
