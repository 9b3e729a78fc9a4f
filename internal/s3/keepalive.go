package s3

import (
	"encoding/xml"
	"net/http"
	"time"
)

// keepAlive implements S3's answer to slow CopyObject and
// CompleteMultipartUpload requests: when the work takes longer than a
// delay, the 200 status and the XML declaration are sent, then a space
// every delay, and the outcome follows in the body, either the result or
// an <Error> document (which the SDKs look for in 200 responses to these
// operations).
type keepAlive struct {
	h       *handler
	req     *request
	stop    chan struct{}
	done    chan struct{}
	started bool // written by run before done closes
}

func (h *handler) startKeepAlive(req *request) *keepAlive {
	k := &keepAlive{h: h, req: req, stop: make(chan struct{}), done: make(chan struct{})}
	go k.run(h.keepAliveDelay)
	return k
}

func (k *keepAlive) run(every time.Duration) {
	defer close(k.done)
	t := time.NewTimer(every)
	defer t.Stop()
	select {
	case <-k.stop:
		return
	case <-t.C:
	}
	w := k.req.w
	w.Header().Set("Content-Type", "application/xml")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write([]byte(xml.Header))
	w.Flush()
	k.started = true
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-k.stop:
			return
		case <-tick.C:
			_, _ = w.Write([]byte(" "))
			w.Flush()
		}
	}
}

// end stops the keep-alive and reports whether the response started.
func (k *keepAlive) end() bool {
	close(k.stop)
	<-k.done
	return k.started
}

// finish sends the result document v.
func (k *keepAlive) finish(v any) error {
	if !k.end() {
		return writeXML(k.req.w, v)
	}
	body, err := xml.Marshal(v)
	if err != nil {
		return err
	}
	_, _ = k.req.w.Write(body)
	return nil
}

// fail reports err: as the handler's error when nothing was sent yet,
// else as an <Error> document in the 200 body.
func (k *keepAlive) fail(err error) error {
	if !k.end() {
		return err
	}
	e := toError(err)
	k.h.opts.Logger.Error("s3 request failed after its response started", "method", k.req.r.Method,
		"path", k.req.r.URL.Path, "request_id", k.req.id, "code", e.Code, "err", err)
	body, _ := xml.Marshal(errorResponse{Code: e.Code, Message: e.Message, Resource: k.req.r.URL.Path, RequestID: k.req.id})
	_, _ = k.req.w.Write(body)
	return nil
}
