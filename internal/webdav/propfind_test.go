package webdav

import (
	"encoding/xml"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

// multistatus is a client's view of a 207 response.
type multistatus struct {
	Responses []struct {
		Href      string `xml:"DAV: href"`
		Propstats []struct {
			Status string `xml:"DAV: status"`
			Prop   struct {
				DisplayName   *string `xml:"DAV: displayname"`
				ContentLength *string `xml:"DAV: getcontentlength"`
				LastModified  *string `xml:"DAV: getlastmodified"`
				CreationDate  *string `xml:"DAV: creationdate"`
				ETag          *string `xml:"DAV: getetag"`
				ContentType   *string `xml:"DAV: getcontenttype"`
				ResourceType  *struct {
					Collection *struct{} `xml:"DAV: collection"`
				} `xml:"DAV: resourcetype"`
				Any []struct {
					XMLName xml.Name
				} `xml:",any"`
			} `xml:"DAV: prop"`
		} `xml:"DAV: propstat"`
	} `xml:"DAV: response"`
}

func propfind(t *testing.T, ts *testServer, path, depth, body string) multistatus {
	t.Helper()
	var b []byte
	if body != "" {
		b = []byte(body)
	}
	r := ts.must(http.StatusMultiStatus, "PROPFIND", path, b, map[string]string{"Depth": depth, "Content-Type": "application/xml"})
	if !strings.HasPrefix(r.Header.Get("Content-Type"), "application/xml") {
		t.Errorf("Content-Type %q", r.Header.Get("Content-Type"))
	}
	var ms multistatus
	if err := xml.Unmarshal(r.body, &ms); err != nil {
		t.Fatalf("multistatus: %v\n%s", err, r.body)
	}
	return ms
}

func TestPropfind(t *testing.T) {
	ts := newTestServer(t)
	data := []byte("twelve bytes")
	ts.put("/dir/file one & two", data)
	ts.put("/dir/sub/deeper", data)
	info, _ := ts.store.Stat(t.Context(), "/dir/file one & two")

	// Depth 0 of an object: every live property.
	ms := propfind(t, ts, "/dir/file%20one%20&%20two", "0", "")
	if len(ms.Responses) != 1 {
		t.Fatalf("%d responses", len(ms.Responses))
	}
	r := ms.Responses[0]
	p := r.Propstats[0].Prop
	if r.Href != "/dir/file%20one%20&%20two" || r.Propstats[0].Status != "HTTP/1.1 200 OK" ||
		*p.ContentLength != "12" || *p.DisplayName != "file one & two" || p.ResourceType == nil || p.ResourceType.Collection != nil ||
		*p.ETag != `"`+string(info.Version)+`"` || *p.ContentType != "application/octet-stream" {
		t.Errorf("object response: %+v %+v", r, p)
	}
	if lm, err := http.ParseTime(*p.LastModified); err != nil || !lm.Equal(info.MTime.Truncate(time.Second)) {
		t.Errorf("getlastmodified %q: %v", *p.LastModified, err)
	}
	if cd, err := time.Parse(time.RFC3339, *p.CreationDate); err != nil || !cd.Equal(info.MTime.Truncate(time.Second)) {
		t.Errorf("creationdate %q: %v", *p.CreationDate, err)
	}

	// Depth 1 of a collection: itself, then its members.
	ms = propfind(t, ts, "/dir", "1", `<?xml version="1.0"?><D:propfind xmlns:D="DAV:"><D:allprop/></D:propfind>`)
	var hrefs []string
	for _, r := range ms.Responses {
		hrefs = append(hrefs, r.Href)
	}
	if strings.Join(hrefs, " ") != "/dir/ /dir/file%20one%20&%20two /dir/sub/" {
		t.Fatalf("depth 1 hrefs %q", hrefs)
	}
	for i, r := range ms.Responses {
		p := r.Propstats[0].Prop
		isDir := i != 1
		if p.ResourceType == nil || (p.ResourceType.Collection != nil) != isDir || (p.ContentLength != nil) == isDir {
			t.Errorf("%s: resourcetype %+v, getcontentlength %v", r.Href, p.ResourceType, p.ContentLength)
		}
	}
	// Depth 1 of an object is the object; the root lists its top level.
	if ms := propfind(t, ts, "/dir/sub/deeper", "1", ""); len(ms.Responses) != 1 {
		t.Errorf("depth 1 of an object: %d responses", len(ms.Responses))
	}
	if ms := propfind(t, ts, "/", "1", ""); len(ms.Responses) != 2 || ms.Responses[0].Href != "/" || ms.Responses[1].Href != "/dir/" {
		t.Errorf("depth 1 of /: %+v", ms.Responses)
	}

	// Named properties: known ones found, unknown ones in a 404 propstat.
	ms = propfind(t, ts, "/dir/sub/deeper", "0", `<propfind xmlns="DAV:" xmlns:X="urn:x"><prop><getcontentlength/><X:color/><quota-used-bytes/></prop></propfind>`)
	ps := ms.Responses[0].Propstats
	if len(ps) != 2 || ps[0].Status != "HTTP/1.1 200 OK" || *ps[0].Prop.ContentLength != strconv.Itoa(len(data)) ||
		ps[0].Prop.DisplayName != nil || ps[1].Status != "HTTP/1.1 404 Not Found" || len(ps[1].Prop.Any) != 2 ||
		ps[1].Prop.Any[0].XMLName != (xml.Name{Space: "urn:x", Local: "color"}) {
		t.Errorf("named properties: %+v", ps)
	}
	// propname: names only.
	ms = propfind(t, ts, "/dir/sub/deeper", "0", `<D:propfind xmlns:D="DAV:"><D:propname/></D:propfind>`)
	if p := ms.Responses[0].Propstats[0].Prop; p.ContentLength == nil || *p.ContentLength != "" || p.ETag == nil {
		t.Errorf("propname: %+v", p)
	}

	// Refused: infinite depth, bad bodies, missing resources.
	for _, depth := range []string{"infinity", ""} {
		r := ts.do("PROPFIND", "/dir", nil, map[string]string{"Depth": depth})
		if r.StatusCode != http.StatusForbidden || !strings.Contains(string(r.body), "propfind-finite-depth") {
			t.Errorf("Depth %q: %d %s", depth, r.StatusCode, r.body)
		}
	}
	for _, body := range []string{"<not-xml", `<D:propfind xmlns:D="DAV:"/>`, `<propfind/>`,
		`<D:propfind xmlns:D="DAV:"><D:allprop/><D:propname/></D:propfind>`, `<D:other xmlns:D="DAV:"/>`} {
		if r := ts.do("PROPFIND", "/dir", []byte(body), map[string]string{"Depth": "0"}); r.StatusCode != http.StatusBadRequest {
			t.Errorf("body %q: status %d", body, r.StatusCode)
		}
	}
	ts.must(http.StatusNotFound, "PROPFIND", "/nothing", nil, map[string]string{"Depth": "0"})
	big := "<D:propfind xmlns:D=\"DAV:\"><D:prop>" + strings.Repeat("<D:x/>", maxPropfindBody/6+1) + "</D:prop></D:propfind>"
	ts.must(http.StatusRequestEntityTooLarge, "PROPFIND", "/dir", []byte(big), map[string]string{"Depth": "0"})
}
