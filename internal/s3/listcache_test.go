package s3

import (
	"context"
	"fmt"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ecstore/ecstore/internal/node"
	"github.com/ecstore/ecstore/internal/object"
)

// listedServer is a test server whose store lists through Faulty nodes
// counting listings, with a listing cache keeping listings of 10 names
// or more on a clock the test moves.
func listedServer(t *testing.T) (*testServer, *handler, func() int64, *atomic.Int64) {
	ts := newTestServer(t)
	var lists []*node.Rule
	var nodes []node.Node
	for _, n := range ts.c.Nodes {
		r := node.Inject(node.OpList, node.Delay(0))
		lists = append(lists, r)
		nodes = append(nodes, node.Wrap(n, r))
	}
	store, err := object.New(nodes, object.Options{Geometry: testGeometry, MinFree: -1})
	if err != nil {
		t.Fatal(err)
	}
	var clock atomic.Int64
	clock.Store(time.Now().UnixNano())
	h := NewHandler(store, Options{Credentials: map[string]string{testAK: testSecret},
		Now: func() time.Time { return time.Unix(0, clock.Load()) }}).(*handler)
	h.listings.minLen = 10
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	paged := *ts
	paged.srv, paged.h = srv, h
	listed := func() int64 {
		var n int64
		for _, r := range lists {
			n += r.Fired()
		}
		return n
	}
	return &paged, h, listed, &clock
}

// pageKeys lists bucket "bkt" in pages of size (pageThrough) and
// returns its keys and the node listings each page made.
func pageKeys(t *testing.T, ts *testServer, listed func() int64, size int, between func(page int)) ([]string, []int64) {
	pages, perPage := pageThrough(t, ts, size, listed, between)
	var keys []string
	for _, res := range pages {
		for _, c := range res.Contents {
			keys = append(keys, c.Key)
		}
	}
	return keys, perPage
}

// Pages that continue a listing of a large directory take its name
// listing from the page before: the nodes list the directory for the
// first page only, and every key comes once, in order.
func TestListingCacheServesContinuedPages(t *testing.T) {
	ts, _, listed, clock := listedServer(t)
	ts.must(200, "PUT", "/bkt", nil, nil)
	var want []string
	for i := range 24 {
		k := fmt.Sprintf("k%02d", i)
		ts.must(200, "PUT", "/bkt/"+k, []byte(k), nil)
		want = append(want, k)
	}
	clock.Add(int64(time.Millisecond)) // the listing comes after the writes
	keys, perPage := pageKeys(t, ts, listed, 5, nil)
	if fmt.Sprint(keys) != fmt.Sprint(want) {
		t.Fatalf("keys %v, want %v", keys, want)
	}
	if len(perPage) != 5 {
		t.Fatalf("%d pages, want 5", len(perPage))
	}
	nodes := int64(len(ts.c.Nodes))
	if perPage[0] < nodes {
		t.Errorf("the first page made %d node listings, want at least one per node (%d)", perPage[0], nodes)
	}
	for i, n := range perPage[1:] {
		if n != 0 {
			t.Errorf("page %d listed the directory again (%d node listings)", i+1, n)
		}
	}
}

// A kept listing is not used once listingCacheAge has passed, nor after
// a key of its directory was written or removed through S3, nor by a
// page that does not continue a listing (start-after, V1's marker);
// objects removed otherwise since it was made are not listed.
func TestListingCacheAgeAndChanges(t *testing.T) {
	ts, h, listed, clock := listedServer(t)
	ts.must(200, "PUT", "/bkt", nil, nil)
	for i := range 24 {
		k := fmt.Sprintf("k%02d", i)
		ts.must(200, "PUT", "/bkt/"+k, []byte(k), nil)
	}
	clock.Add(int64(time.Millisecond))
	ctx := context.Background()
	nodes := int64(len(ts.c.Nodes))
	keys, perPage := pageKeys(t, ts, listed, 5, func(page int) {
		clock.Add(int64(time.Millisecond))
		switch page {
		case 0:
			// Removed over root://: page 1 takes the kept listing and
			// finds k07 gone.
			if err := h.store.Remove(ctx, "/bkt/k07"); err != nil {
				t.Fatal(err)
			}
		case 1:
			clock.Add(int64(h.listings.maxAge)) // page 2 lists afresh
		case 2:
			ts.must(200, "PUT", "/bkt/k20x", []byte("new"), nil) // page 3 lists afresh
		}
		clock.Add(int64(time.Millisecond))
	})
	var want []string
	for i := range 24 {
		if k := fmt.Sprintf("k%02d", i); k != "k07" {
			want = append(want, k)
			if k == "k20" {
				want = append(want, "k20x")
			}
		}
	}
	if fmt.Sprint(keys) != fmt.Sprint(want) {
		t.Fatalf("keys %v, want %v", keys, want)
	}
	if len(perPage) != 5 || perPage[1] != 0 || perPage[2] < nodes || perPage[3] < nodes || perPage[4] != 0 {
		t.Errorf("node listings per page %v: want none for page 1 (kept), one per node for page 2 (too old) and page 3 (a key written), none for page 4", perPage)
	}
	// A new listing starts afresh even with a fresh listing kept, and so
	// does one from a key on (start-after), which sees a key written
	// over root:// since.
	for _, q := range []string{"/bkt?list-type=2&max-keys=5", "/bkt?list-type=2&start-after=k21", "/bkt?marker=k21"} {
		if q != "/bkt?list-type=2&max-keys=5" {
			if err := putObject(ctx, h.store, "/bkt/k21y"); err != nil {
				t.Fatal(err)
			}
		}
		before := listed()
		var res listObjectsResult
		decodeXML(t, ts.must(200, "GET", q, nil, nil), &res)
		if n := listed() - before; n < nodes {
			t.Errorf("%s made %d node listings with a listing kept, want a fresh one", q, n)
		}
		if q != "/bkt?list-type=2&max-keys=5" && (len(res.Contents) == 0 || res.Contents[0].Key != "k21y") {
			t.Errorf("%s listed %+v first, want k21y", q, res.Contents)
		}
	}
}

// The cache holds at most maxKept names: the oldest listings go first,
// and a listing taken is out of it until given back.
func TestListingCacheBounds(t *testing.T) {
	now := time.Unix(1000, 0)
	c := newListingCache(func() time.Time { return now })
	c.minLen, c.maxKept = 1, 5
	ts := newTestServer(t)
	ts.must(200, "PUT", "/bkt", nil, nil)
	for i := range 3 {
		ts.must(200, "PUT", fmt.Sprintf("/bkt/a/k%d", i), []byte("x"), nil)
		ts.must(200, "PUT", fmt.Sprintf("/bkt/b/k%d", i), []byte("x"), nil)
	}
	list := func(dir string) *dirListing {
		l, err := ts.c.Store.ListNames(t.Context(), dir)
		if err != nil {
			t.Fatalf("ListNames %s: %v", dir, err)
		}
		dl := newDirListing(l)
		if len(dl.infos) != 3 {
			t.Fatalf("ListNames %s: %d entries", dir, len(dl.infos))
		}
		return dl
	}
	a, b := list("/bkt/a"), list("/bkt/b")
	c.keep("/bkt/a", a, now)
	c.keep("/bkt/b", b, now.Add(time.Second)) // a makes room: 6 names > 5
	if l, _ := c.take("/bkt/a"); l != nil {
		t.Error("the oldest listing was kept past the bound")
	}
	if l, _ := c.take("/bkt/b"); l != b {
		t.Error("the newest listing was not kept")
	}
	if l, _ := c.take("/bkt/b"); l != nil {
		t.Error("a listing taken was still in the cache")
	}
	if c.names != 0 {
		t.Errorf("%d names counted in an empty cache", c.names)
	}
}

// putObject writes a small object at path through the store, as a
// root:// client would: the S3 front end does not see the write.
func putObject(ctx context.Context, store *object.Store, path string) error {
	w, err := store.Create(ctx, path, nil)
	if err != nil {
		return err
	}
	if _, err := w.Write([]byte("x")); err != nil {
		w.Abort()
		return err
	}
	return w.Close()
}
