package s3

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http/httptest"
	"net/url"
	"os"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/ecstore/ecstore/internal/node"
	"github.com/ecstore/ecstore/internal/object"
)

// modelList is the reference listing: keys (sorted) filtered by prefix
// and marker, rolled up by delimiter. A common prefix is listed when it
// sorts after the marker. Items are "K:key" or "P:prefix".
func modelList(keys []string, prefix, delim, after string) []string {
	var out []string
	seen := map[string]bool{}
	for _, k := range keys {
		if !strings.HasPrefix(k, prefix) {
			continue
		}
		if delim != "" {
			if i := strings.Index(k[len(prefix):], delim); i >= 0 {
				cp := k[:len(prefix)+i+len(delim)]
				if cp > after && !seen[cp] {
					seen[cp] = true
					out = append(out, "P:"+cp)
				}
				continue
			}
		}
		if k > after {
			out = append(out, "K:"+k)
		}
	}
	return out
}

// randomKeys draws up to n distinct keys of 1 to 3 path elements, none
// of them a prefix directory of another, and returns them with the set
// of keys. A key drawn at depth 1 or 2 blocks every deeper key below it,
// so the draws can run out of room before n (most top-level names taken
// as keys): it stops after 10000 draws in a row that added nothing.
func randomKeys(rng *rand.Rand, n int) ([]string, map[string]bool) {
	names := []string{"a", "a.b", "a-b", "a0", "b", "c d", "é", "z~", "a+", ".h"}
	files, dirs := map[string]bool{}, map[string]bool{}
	var keys []string
	for misses := 0; len(keys) < n && misses < 10000; {
		depth := 1 + rng.IntN(3)
		els := make([]string, depth)
		for i := range els {
			els[i] = names[rng.IntN(len(names))]
		}
		ok := true
		for i := 1; i < depth; i++ {
			if files[strings.Join(els[:i], "/")] {
				ok = false
			}
		}
		k := strings.Join(els, "/")
		if !ok || files[k] || dirs[k] {
			misses++
			continue
		}
		misses = 0
		for i := 1; i < depth; i++ {
			dirs[strings.Join(els[:i], "/")] = true
		}
		files[k] = true
		keys = append(keys, k)
	}
	return keys, files
}

// TestRandomKeysStopsWhenTheTreeIsFull: with seed 198 the draws leave
// room for only 118 keys; the generator used to draw forever (CI: the
// s3 tests spun in buildTree until their 20-minute timeout). The keys it
// returns are distinct and none lies below another.
func TestRandomKeysStopsWhenTheTreeIsFull(t *testing.T) {
	const seed = 198
	keys, files := randomKeys(rand.New(rand.NewPCG(seed, seed^0x5eed)), 120)
	if len(keys) >= 120 || len(keys) < 100 {
		t.Fatalf("%d keys, want the 118 that fit", len(keys))
	}
	for _, k := range keys {
		for i := range k {
			if k[i] == '/' && files[k[:i]] {
				t.Errorf("key %q lies below key %q", k, k[:i])
			}
		}
	}
	if len(files) != len(keys) {
		t.Errorf("%d keys, %d distinct", len(keys), len(files))
	}
}

// buildTree stores a random tree of keys (and a few empty directories,
// listed as "dir/" keys) in bucket and returns the sorted keys.
func buildTree(t *testing.T, ts *testServer, bucket string, n int) []string {
	keys, files := randomKeys(testRand(t), n)
	ctx := context.Background()
	var wg sync.WaitGroup
	sem := make(chan struct{}, 8)
	for _, k := range keys {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			ts.c.Put(t, "/"+bucket+"/"+k, []byte(k))
		}()
	}
	wg.Wait()
	// Empty directories, one at the top and one inside a directory.
	for _, d := range []string{"empty", "a/empty"} {
		if files["a"] && d == "a/empty" {
			continue
		}
		if err := ts.c.Store.Mkdir(ctx, "/"+bucket+"/"+d); err != nil {
			t.Fatal(err)
		}
		keys = append(keys, d+"/")
	}
	sort.Strings(keys)
	return keys
}

// listAll pages through a listing and returns its items.
func listAll(t *testing.T, ts *testServer, bucket, prefix, delim string, maxKeys int, v2 bool, startAfter string) []string {
	t.Helper()
	var out []string
	token, marker := "", ""
	for page := 0; ; page++ {
		q := url.Values{"prefix": {prefix}, "delimiter": {delim}, "max-keys": {fmt.Sprint(maxKeys)}, "encoding-type": {"url"}}
		if v2 {
			q.Set("list-type", "2")
			if token != "" {
				q.Set("continuation-token", token)
			} else if startAfter != "" {
				q.Set("start-after", startAfter)
			}
		} else if marker != "" {
			q.Set("marker", marker)
		} else if startAfter != "" {
			q.Set("marker", startAfter)
		}
		r := ts.must(200, "GET", "/"+bucket+"?"+strings.ReplaceAll(q.Encode(), "+", "%20"), nil, nil)
		var res listObjectsResult
		decodeXML(t, r, &res)
		dec := func(s string) string {
			u, err := url.QueryUnescape(s)
			if err != nil {
				t.Fatalf("bad encoding %q", s)
			}
			return u
		}
		n := 0
		var items []string
		for _, c := range res.Contents {
			items = append(items, "K:"+dec(c.Key))
			if strings.HasSuffix(c.Key, "/") && c.ETag != `"`+emptyMD5+`"` {
				t.Fatalf("marker %s ETag %s", c.Key, c.ETag)
			}
		}
		for _, p := range res.CommonPrefixes {
			items = append(items, "P:"+dec(p.Prefix))
		}
		// S3 returns Contents and CommonPrefixes apart; each is sorted.
		sort.Slice(items, func(i, j int) bool { return items[i][2:] < items[j][2:] })
		out = append(out, items...)
		n = len(items)
		if n > maxKeys {
			t.Fatalf("page of %d items, max-keys %d", n, maxKeys)
		}
		if v2 && (res.KeyCount == nil || *res.KeyCount != n) {
			t.Fatalf("KeyCount %v, want %d", res.KeyCount, n)
		}
		if !res.IsTruncated {
			return out
		}
		if n == 0 {
			t.Fatal("truncated empty page")
		}
		token, marker = res.NextContinuationToken, dec(res.NextMarker)
		if page > 1000 {
			t.Fatal("listing does not end")
		}
	}
}

func TestListingModel(t *testing.T) {
	ts := newTestServer(t)
	ts.must(200, "PUT", "/bkt", nil, nil)
	keys := buildTree(t, ts, "bkt", 120)
	prefixes := []string{"", "a", "a/", "a.b", "a/a", "a/a/", "zz", "c d/", "é", "empty/", "emp", "a/empty/", ".h/"}
	for _, k := range keys[:4] {
		prefixes = append(prefixes, k, k[:len(k)/2])
	}
	// Every prefix with every delimiter; page sizes and API versions
	// rotate through the combinations.
	i := 0
	for _, prefix := range prefixes {
		for _, delim := range []string{"", "/", "."} {
			i++
			v2, maxKeys := i%2 == 0, []int{1000, 3, 1000, 1}[i%4]
			want := modelList(keys, prefix, delim, "")
			if maxKeys < 1000 && len(want) > 12 {
				maxKeys = 17 // keep the number of pages small
			}
			got := listAll(t, ts, "bkt", prefix, delim, maxKeys, v2, "")
			if !slices.Equal(got, want) {
				t.Fatalf("prefix=%q delim=%q max=%d v2=%v:\n got %q\nwant %q", prefix, delim, maxKeys, v2, got, want)
			}
		}
	}
	// start-after / marker at arbitrary keys, present or not.
	for _, after := range []string{keys[0], keys[len(keys)/2], keys[len(keys)/2] + "x", "a/", "a", "a.", "b/", "zzz"} {
		for _, delim := range []string{"", "/"} {
			want := modelList(keys, "", delim, after)
			for _, v2 := range []bool{true, false} {
				got := listAll(t, ts, "bkt", "", delim, 30, v2, after)
				if !slices.Equal(got, want) {
					t.Fatalf("after=%q delim=%q v2=%v:\n got %q\nwant %q", after, delim, v2, got, want)
				}
			}
		}
	}
	ts.fails(400, "InvalidArgument", "GET", "/bkt?list-type=2&max-keys=-1", nil, nil)
	ts.fails(400, "InvalidArgument", "GET", "/bkt?list-type=2&continuation-token=%25%25", nil, nil)
	ts.fails(400, "InvalidArgument", "GET", "/bkt?encoding-type=base64", nil, nil)
	var res listObjectsResult
	decodeXML(t, ts.must(200, "GET", "/bkt?list-type=2&max-keys=0", nil, nil), &res)
	if len(res.Contents) != 0 || res.IsTruncated {
		t.Fatalf("max-keys=0: %+v", res)
	}
}

func TestListingETags(t *testing.T) {
	ts := newTestServer(t)
	ts.must(200, "PUT", "/bkt", nil, nil)
	ts.must(200, "PUT", "/bkt/d/one", []byte("one"), nil)
	ts.c.Put(t, "/bkt/d/native", []byte("native"))
	var res listObjectsResult
	decodeXML(t, ts.must(200, "GET", "/bkt?list-type=2&fetch-owner=true", nil, nil), &res)
	if len(res.Contents) != 2 {
		t.Fatalf("contents %+v", res.Contents)
	}
	head := ts.must(200, "HEAD", "/bkt/d/native", nil, nil)
	for _, c := range res.Contents {
		want := map[string]string{"d/one": `"` + fmt.Sprintf("%x", md5sum([]byte("one"))) + `"`, "d/native": head.Header.Get("ETag")}[c.Key]
		if c.ETag != want || c.Owner == nil || c.StorageClass != "STANDARD" || c.Size == 0 {
			t.Errorf("%+v, want ETag %s", c, want)
		}
	}
}

// countingNode records the directories listed on it.
type countingNode struct {
	node.Node
	mu    *sync.Mutex
	lists map[string]int
}

func (c countingNode) List(ctx context.Context, dir string) ([]node.FileInfo, error) {
	c.mu.Lock()
	c.lists[dir]++
	c.mu.Unlock()
	return c.Node.List(ctx, dir)
}

// Listings enter only the directories a page needs.
func TestListingIsLazy(t *testing.T) {
	ts := newTestServer(t)
	ts.must(200, "PUT", "/bkt", nil, nil)
	var mu sync.Mutex
	lists := map[string]int{}
	var nodes []node.Node
	for _, n := range ts.c.Nodes {
		nodes = append(nodes, countingNode{Node: n, mu: &mu, lists: lists})
	}
	store, err := object.New(nodes, object.Options{Geometry: testGeometry, MinFree: -1})
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{"a", "b", "c"} {
		for i := range 3 {
			for j := range 3 {
				ts.c.Put(t, fmt.Sprintf("/bkt/%s/%d/%d", d, i, j), []byte("x"))
			}
		}
	}
	srv := httptest.NewServer(NewHandler(store, Options{Credentials: map[string]string{testAK: testSecret}}))
	defer srv.Close()
	lazy := *ts
	lazy.srv = srv
	listed := func(query string) []string {
		mu.Lock()
		clear(lists)
		mu.Unlock()
		lazy.must(200, "GET", "/bkt?"+query, nil, nil)
		mu.Lock()
		defer mu.Unlock()
		var dirs []string
		for d := range lists {
			dirs = append(dirs, d)
		}
		sort.Strings(dirs)
		return dirs
	}
	for _, c := range []struct {
		query string
		want  []string
	}{
		{"list-type=2&delimiter=/", []string{"/bkt"}},
		{"list-type=2&delimiter=/&prefix=b/", []string{"/bkt/b"}},
		{"list-type=2&delimiter=/&prefix=b/1", []string{"/bkt/b"}},
		{"list-type=2&prefix=b/1/", []string{"/bkt/b/1"}},
		{"list-type=2&max-keys=2", []string{"/bkt", "/bkt/a", "/bkt/a/0"}},
		{"list-type=2&max-keys=2&start-after=b/1/2", []string{"/bkt", "/bkt/b", "/bkt/b/1", "/bkt/b/2"}},
		{"marker=c/0/0&max-keys=1", []string{"/bkt", "/bkt/c", "/bkt/c/0"}},
	} {
		if got := listed(c.query); !slices.Equal(got, c.want) {
			t.Errorf("%s listed %q, want %q", c.query, got, c.want)
		}
	}
}

// listsNoAttrs is a node whose listings carry no attributes, as a remote
// node's kXR_dirlist: the store reads summaries by path (ReadAttrs),
// which the Faulty's rules count.
type listsNoAttrs struct{ *node.Faulty }

func (n listsNoAttrs) List(ctx context.Context, dir string) ([]node.FileInfo, error) {
	fis, err := n.Faulty.List(ctx, dir)
	for i := range fis {
		fis[i].Attrs = nil
	}
	return fis, err
}

// A page of a flat directory describes the objects it lists (and one
// more, to know whether it is truncated), not every object of the
// directory: paging through n keys reads each object's summaries about
// once, not n/page times. Every page is still right, ETags included.
func TestListingDescribesOnlyThePage(t *testing.T) {
	ts := newTestServer(t)
	ts.must(200, "PUT", "/bkt", nil, nil)
	const objects = 40
	var keys []string
	etags := map[string]string{}
	for i := range objects {
		k := fmt.Sprintf("k%02d", i)
		body := []byte(k)
		ts.must(200, "PUT", "/bkt/"+k, body, nil)
		keys = append(keys, k)
		etags[k] = fmt.Sprintf(`"%x"`, md5sum(body))
	}
	var attrs []*node.Rule
	var nodes []node.Node
	for _, n := range ts.c.Nodes {
		r := node.Inject(node.OpReadAttrs, node.Delay(0))
		attrs = append(attrs, r)
		nodes = append(nodes, listsNoAttrs{node.Wrap(n, r)})
	}
	reads := func() int {
		n := 0
		for _, r := range attrs {
			n += int(r.Fired())
		}
		return n
	}
	store, err := object.New(nodes, object.Options{Geometry: testGeometry, MinFree: -1})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(NewHandler(store, Options{Credentials: map[string]string{testAK: testSecret}}))
	defer srv.Close()
	paged := *ts
	paged.srv = srv
	// Archives per object: small objects are kept as M+1 copies.
	copies := testGeometry.M + 1

	const page = 5
	pages, counted := pageThrough(t, &paged, page, func() int64 { return int64(reads()) }, nil)
	var got []string
	for i, res := range pages {
		// The bucket's own lookup reads up to a summary per node.
		if n, most := counted[i], int64((page+1)*copies+len(nodes)); n > most {
			t.Errorf("page %d read %d summaries; want at most %d ((page+1) objects × %d copies, and the bucket's lookup)", i, n, most, copies)
		}
		for _, c := range res.Contents {
			got = append(got, c.Key)
			if c.ETag != etags[c.Key] {
				t.Errorf("%s: ETag %s; want %s", c.Key, c.ETag, etags[c.Key])
			}
		}
	}
	if !slices.Equal(got, keys) {
		t.Errorf("paged through %q; want %q", got, keys)
	}
}

// A directory that holds nothing but the remnants of a removed object (an
// archive whose removal failed, hidden by the tombstones) is listed as
// an empty directory, its "dir/" marker, as a directory with no entries.
func TestListingMarksADirectoryOfRemnants(t *testing.T) {
	ts := newTestServer(t)
	ts.must(200, "PUT", "/bkt", nil, nil)
	ts.c.Put(t, "/bkt/dir/obj", []byte("soon removed"))
	// Removals of the object's archive fail on one node holding a copy.
	fail := node.Inject(node.OpRemove, node.Fail(nil)).Path(func(p string) bool { return p == "/bkt/dir/obj" })
	var nodes []node.Node
	kept := -1
	for i, n := range ts.c.Nodes {
		if _, err := os.Stat(ts.c.Archive(i, "/bkt/dir/obj")); err == nil && kept < 0 {
			kept = i
			nodes = append(nodes, node.Wrap(n, fail))
			continue
		}
		nodes = append(nodes, n)
	}
	store, err := object.New(nodes, object.Options{Geometry: testGeometry, MinFree: -1})
	if err != nil {
		t.Fatal(err)
	}
	if err := store.Remove(context.Background(), "/bkt/dir/obj"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(ts.c.Archive(kept, "/bkt/dir/obj")); err != nil || fail.Fired() == 0 {
		t.Fatalf("the archive on node %d is gone (%v) or was not asked to go", kept, err)
	}
	var res listObjectsResult
	decodeXML(t, ts.must(200, "GET", "/bkt?list-type=2", nil, nil), &res)
	if len(res.Contents) != 1 || res.Contents[0].Key != "dir/" {
		t.Errorf("listed %+v; want the marker dir/ alone", res.Contents)
	}
	// What a repair would do, for the check at the end of the test.
	if err := os.Remove(ts.c.Archive(kept, "/bkt/dir/obj")); err != nil {
		t.Fatal(err)
	}
}

// pageThrough lists bucket "bkt" with ListObjectsV2 in pages of size
// until the last, calling between(page) after each page that is
// truncated, and returns the pages and how much count went up over each.
func pageThrough(t *testing.T, ts *testServer, size int, count func() int64, between func(page int)) ([]listObjectsResult, []int64) {
	t.Helper()
	var pages []listObjectsResult
	var counted []int64
	token := ""
	for page := 0; ; page++ {
		if page > 1000 {
			t.Fatal("paging does not end")
		}
		before := count()
		q := fmt.Sprintf("/bkt?list-type=2&max-keys=%d", size)
		if token != "" {
			q += "&continuation-token=" + url.QueryEscape(token)
		}
		var res listObjectsResult
		decodeXML(t, ts.must(200, "GET", q, nil, nil), &res)
		pages = append(pages, res)
		counted = append(counted, count()-before)
		if !res.IsTruncated {
			return pages, counted
		}
		token = res.NextContinuationToken
		if between != nil {
			between(page)
		}
	}
}

// A listing takes the ETag of an object without user metadata (written
// over root://, say) from its version, as its summaries say it has none:
// no archive of it is opened. An object written over S3 has its MD5 as
// ETag, read from its archive's metadata.
func TestListingETagsOfPlainObjectsReadNoArchive(t *testing.T) {
	ts := newTestServer(t)
	ts.must(200, "PUT", "/bkt", nil, nil)
	ts.must(200, "PUT", "/bkt/s3", []byte("over s3"), nil)
	for i := range 3 {
		ts.c.Put(t, fmt.Sprintf("/bkt/native%d", i), []byte("over root"))
	}
	var rules []*node.Rule
	var nodes []node.Node
	for _, n := range ts.c.Nodes {
		r := node.Inject(node.OpOpen, node.Delay(0)).Path(func(p string) bool { return strings.Contains(p, "/native") })
		rules = append(rules, r)
		nodes = append(nodes, node.Wrap(n, r))
	}
	store, err := object.New(nodes, object.Options{Geometry: testGeometry, MinFree: -1})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(NewHandler(store, Options{Credentials: map[string]string{testAK: testSecret}}))
	defer srv.Close()
	counted := *ts
	counted.srv = srv
	var res listObjectsResult
	decodeXML(t, counted.must(200, "GET", "/bkt?list-type=2", nil, nil), &res)
	if len(res.Contents) != 4 {
		t.Fatalf("contents %+v", res.Contents)
	}
	for _, c := range res.Contents {
		if want := ts.must(200, "HEAD", "/bkt/"+c.Key, nil, nil).Header.Get("ETag"); c.ETag != want {
			t.Errorf("%s: ETag %s, want %s (HEAD's)", c.Key, c.ETag, want)
		}
	}
	if want := `"` + fmt.Sprintf("%x", md5sum([]byte("over s3"))) + `"`; res.Contents[3].Key != "s3" || res.Contents[3].ETag != want {
		t.Errorf("s3: %+v, want ETag %s", res.Contents[3], want)
	}
	opened := int64(0)
	for _, r := range rules {
		opened += r.Fired()
	}
	if opened != 0 {
		t.Errorf("the listing opened %d archives of objects without user metadata", opened)
	}
}
