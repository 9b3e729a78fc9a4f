package webdav

import (
	"bufio"
	"bytes"
	"encoding/xml"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/ecstore/ecstore/internal/object"
)

// PROPFIND (RFC 4918 section 9.1). The live properties served are those
// of section 15 that file clients read: creationdate (the modification
// time: ecstore keeps no creation time), displayname, getcontentlength,
// getcontenttype and getetag (objects only), getlastmodified and
// resourcetype. There are no dead properties and no locks. Depth 0
// describes the resource, Depth 1 also its members; Depth: infinity (and
// a missing Depth, which means infinity) is refused with 403 and the
// propfind-finite-depth precondition, as section 9.1 allows.

// maxPropfindBody bounds a PROPFIND request body.
const maxPropfindBody = 1 << 20

// davNS is the WebDAV XML namespace.
const davNS = "DAV:"

// propfindMode is what a PROPFIND asks for.
type propfindMode int

const (
	allProp  propfindMode = iota // every live property (also: empty body)
	propName                     // the names of the properties
	someProp                     // the listed properties
)

// propfindRequest is a parsed PROPFIND body.
type propfindRequest struct {
	mode  propfindMode
	names []xml.Name // for someProp
}

// xmlPropfind is the propfind element (RFC 4918 section 14.20).
type xmlPropfind struct {
	XMLName  xml.Name  `xml:"DAV: propfind"`
	Allprop  *struct{} `xml:"DAV: allprop"`
	Propname *struct{} `xml:"DAV: propname"`
	Prop     *struct {
		Names []struct {
			XMLName xml.Name
		} `xml:",any"`
	} `xml:"DAV: prop"`
}

// parsePropfind parses a PROPFIND body; an empty body means allprop.
// Anything else than one propfind element holding exactly one of
// allprop, propname and prop is a 400.
func parsePropfind(body []byte) (propfindRequest, error) {
	if len(bytes.TrimSpace(body)) == 0 {
		return propfindRequest{mode: allProp}, nil
	}
	var p xmlPropfind
	if err := xml.Unmarshal(body, &p); err != nil {
		return propfindRequest{}, wrapf(err, http.StatusBadRequest, "malformed PROPFIND body")
	}
	n := 0
	for _, set := range []bool{p.Allprop != nil, p.Propname != nil, p.Prop != nil} {
		if set {
			n++
		}
	}
	switch {
	case n != 1:
		return propfindRequest{}, errorf(http.StatusBadRequest, "a propfind element holds exactly one of allprop, propname and prop")
	case p.Allprop != nil:
		return propfindRequest{mode: allProp}, nil
	case p.Propname != nil:
		return propfindRequest{mode: propName}, nil
	}
	req := propfindRequest{mode: someProp}
	for _, e := range p.Prop.Names {
		req.names = append(req.names, e.XMLName)
	}
	return req, nil
}

// propfind answers PROPFIND with a 207 multistatus document.
func (h *handler) propfind(req *request) error {
	depth := strings.ToLower(strings.TrimSpace(req.r.Header.Get("Depth")))
	if depth != "0" && depth != "1" {
		const doc = xml.Header + `<D:error xmlns:D="DAV:"><D:propfind-finite-depth/></D:error>` + "\n"
		hdr := req.w.Header()
		hdr.Set("Content-Type", "application/xml; charset=utf-8")
		hdr.Set("Content-Length", strconv.Itoa(len(doc)))
		req.w.WriteHeader(http.StatusForbidden)
		_, _ = io.WriteString(req.w, doc)
		h.opts.Logger.Debug("http request refused", "method", req.r.Method, "obj", req.path, "status", http.StatusForbidden, "err", "Depth "+depth)
		return nil
	}
	body, err := io.ReadAll(io.LimitReader(req.r.Body, maxPropfindBody+1))
	if err != nil {
		return wrapf(err, http.StatusBadRequest, "reading the PROPFIND body")
	}
	if len(body) > maxPropfindBody {
		return errorf(http.StatusRequestEntityTooLarge, "the PROPFIND body is larger than %d bytes", maxPropfindBody)
	}
	pf, err := parsePropfind(body)
	if err != nil {
		return err
	}
	info, err := h.store.Stat(req.ctx, req.path)
	if err != nil {
		return err
	}
	var members []object.Info
	if depth == "1" && info.IsDir {
		if members, err = h.store.List(req.ctx, req.path); err != nil {
			return err
		}
	}
	hdr := req.w.Header()
	hdr.Set("Content-Type", "application/xml; charset=utf-8")
	req.w.WriteHeader(http.StatusMultiStatus)
	bw := bufio.NewWriterSize(req.w, 64<<10)
	bw.WriteString(xml.Header + `<D:multistatus xmlns:D="DAV:">` + "\n")
	writeResponse(bw, req.path, info, pf)
	for i := range members {
		writeResponse(bw, memberPath(req.path, members[i].Name), &members[i], pf)
	}
	bw.WriteString("</D:multistatus>\n")
	return bw.Flush()
}

func memberPath(dir, name string) string {
	if dir == "/" {
		return "/" + name
	}
	return dir + "/" + name
}

// hrefOf is the URL path of an object path, escaped; a collection's ends
// in '/'.
func hrefOf(path string, dir bool) string {
	if dir && path != "/" {
		path += "/"
	}
	return (&url.URL{Path: path}).EscapedPath()
}

// liveProp is one property of a resource: its DAV: name and its XML
// content.
type liveProp struct {
	name  string
	value string
}

// liveProps lists the properties of a resource, in a fixed order.
func liveProps(path string, info *object.Info) []liveProp {
	name := info.Name
	if path == "/" {
		name = "/"
	}
	mt := info.MTime.UTC()
	if mt.IsZero() {
		mt = time.Unix(0, 0).UTC()
	}
	props := []liveProp{
		{"displayname", escape(name)},
		{"creationdate", mt.Format(time.RFC3339)},
		{"getlastmodified", mt.Format(http.TimeFormat)},
	}
	if info.IsDir {
		return append(props, liveProp{"resourcetype", "<D:collection/>"})
	}
	ctype := info.User[contentTypeKey]
	if ctype == "" {
		ctype = "application/octet-stream"
	}
	props = append(props,
		liveProp{"resourcetype", ""},
		liveProp{"getcontentlength", strconv.FormatInt(info.Size, 10)},
		liveProp{"getcontenttype", escape(ctype)})
	if etag := etagOf(info); etag != "" {
		props = append(props, liveProp{"getetag", escape(etag)})
	}
	return props
}

// writeResponse writes one response element of a multistatus.
func writeResponse(w *bufio.Writer, path string, info *object.Info, pf propfindRequest) {
	w.WriteString("<D:response><D:href>")
	w.WriteString(escape(hrefOf(path, info.IsDir)))
	w.WriteString("</D:href>")
	props := liveProps(path, info)
	switch pf.mode {
	case allProp, propName:
		w.WriteString("<D:propstat><D:prop>")
		for _, p := range props {
			if pf.mode == propName || p.value == "" {
				w.WriteString("<D:" + p.name + "/>")
			} else {
				w.WriteString("<D:" + p.name + ">" + p.value + "</D:" + p.name + ">")
			}
		}
		w.WriteString("</D:prop><D:status>HTTP/1.1 200 OK</D:status></D:propstat>")
	case someProp:
		var found []liveProp
		var missing []xml.Name
	names:
		for _, n := range pf.names {
			if n.Space == davNS {
				for _, p := range props {
					if p.name == n.Local {
						found = append(found, p)
						continue names
					}
				}
			}
			missing = append(missing, n)
		}
		if len(found) > 0 || len(missing) == 0 {
			w.WriteString("<D:propstat><D:prop>")
			for _, p := range found {
				if p.value == "" {
					w.WriteString("<D:" + p.name + "/>")
				} else {
					w.WriteString("<D:" + p.name + ">" + p.value + "</D:" + p.name + ">")
				}
			}
			w.WriteString("</D:prop><D:status>HTTP/1.1 200 OK</D:status></D:propstat>")
		}
		if len(missing) > 0 {
			w.WriteString("<D:propstat><D:prop>")
			for _, n := range missing {
				switch n.Space {
				case davNS:
					w.WriteString("<D:" + n.Local + "/>")
				case "":
					w.WriteString("<" + n.Local + ` xmlns=""/>`)
				default:
					w.WriteString("<R:" + n.Local + ` xmlns:R="` + escape(n.Space) + `"/>`)
				}
			}
			w.WriteString("</D:prop><D:status>HTTP/1.1 404 Not Found</D:status></D:propstat>")
		}
	}
	w.WriteString("</D:response>\n")
}

// escape escapes text for XML content and attribute values.
func escape(s string) string {
	var b strings.Builder
	_ = xml.EscapeText(&b, []byte(s))
	return b.String()
}
