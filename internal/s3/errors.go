package s3

import (
	"context"
	"encoding/xml"
	"errors"
	"fmt"
	"net/http"

	"github.com/ecstore/ecstore/internal/node"
	"github.com/ecstore/ecstore/internal/object"
)

// Error is an S3 error: a code from the S3 API reference ("NoSuchKey"),
// its HTTP status and a message for people. Handlers return *Error values;
// they are written as the S3 XML error document.
type Error struct {
	Code    string
	Status  int
	Message string
}

func (e *Error) Error() string { return "s3: " + e.Code + ": " + e.Message }

// Is reports whether target is an *Error with the same code, so that
// errors.Is(err, ErrNoSuchKey) holds for any NoSuchKey error.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Code == e.Code
}

// with returns a copy of e with a specific message.
func (e *Error) with(format string, args ...any) *Error {
	c := *e
	c.Message = fmt.Sprintf(format, args...)
	return &c
}

// The S3 errors this frontend returns, with their HTTP status and default
// message. Test with errors.Is; the code is what clients see. KeyConflict
// is ecstore's own: keys are paths, so "a" and "a/b" cannot both exist.
var (
	ErrAccessDenied            = &Error{"AccessDenied", http.StatusForbidden, "Access Denied."}
	ErrSignatureDoesNotMatch   = &Error{"SignatureDoesNotMatch", http.StatusForbidden, "The request signature we calculated does not match the signature you provided. Check your key and signing method."}
	ErrInvalidAccessKeyID      = &Error{"InvalidAccessKeyId", http.StatusForbidden, "The AWS access key Id you provided does not exist in our records."}
	ErrRequestTimeTooSkewed    = &Error{"RequestTimeTooSkewed", http.StatusForbidden, "The difference between the request time and the server's time is too large."}
	ErrAuthHeaderMalformed     = &Error{"AuthorizationHeaderMalformed", http.StatusBadRequest, "The authorization header is malformed."}
	ErrAuthQueryMalformed      = &Error{"AuthorizationQueryParametersError", http.StatusBadRequest, "The presigned URL's authorization parameters are malformed."}
	ErrInvalidRequest          = &Error{"InvalidRequest", http.StatusBadRequest, "Invalid request."}
	ErrInvalidArgument         = &Error{"InvalidArgument", http.StatusBadRequest, "Invalid argument."}
	ErrInvalidBucketName       = &Error{"InvalidBucketName", http.StatusBadRequest, "The specified bucket is not valid."}
	ErrKeyTooLong              = &Error{"KeyTooLongError", http.StatusBadRequest, "Your key is too long."}
	ErrNoSuchBucket            = &Error{"NoSuchBucket", http.StatusNotFound, "The specified bucket does not exist."}
	ErrNoSuchKey               = &Error{"NoSuchKey", http.StatusNotFound, "The specified key does not exist."}
	ErrNoSuchUpload            = &Error{"NoSuchUpload", http.StatusNotFound, "The specified multipart upload does not exist. The upload ID might be invalid, or the upload might have been aborted or completed."}
	ErrBucketNotEmpty          = &Error{"BucketNotEmpty", http.StatusConflict, "The bucket you tried to delete is not empty."}
	ErrBucketAlreadyOwnedByYou = &Error{"BucketAlreadyOwnedByYou", http.StatusConflict, "Your previous request to create the named bucket succeeded and you already own it."}
	ErrBucketAlreadyExists     = &Error{"BucketAlreadyExists", http.StatusConflict, "The requested bucket name is not available."}
	ErrKeyConflict             = &Error{"KeyConflict", http.StatusConflict, "ecstore stores keys as paths: a key cannot be both an object and a prefix of another key followed by '/'."}
	ErrInvalidRange            = &Error{"InvalidRange", http.StatusRequestedRangeNotSatisfiable, "The requested range is not satisfiable."}
	ErrPreconditionFailed      = &Error{"PreconditionFailed", http.StatusPreconditionFailed, "At least one of the preconditions you specified did not hold."}
	ErrNotModified             = &Error{"NotModified", http.StatusNotModified, "Not Modified."}
	ErrMethodNotAllowed        = &Error{"MethodNotAllowed", http.StatusMethodNotAllowed, "The specified method is not allowed against this resource."}
	ErrBadDigest               = &Error{"BadDigest", http.StatusBadRequest, "The Content-MD5 you specified did not match what we received."}
	ErrInvalidDigest           = &Error{"InvalidDigest", http.StatusBadRequest, "The Content-MD5 you specified is not valid."}
	ErrContentSHA256Mismatch   = &Error{"XAmzContentSHA256Mismatch", http.StatusBadRequest, "The provided 'x-amz-content-sha256' header does not match what was computed."}
	ErrIncompleteBody          = &Error{"IncompleteBody", http.StatusBadRequest, "You did not provide the number of bytes specified by the Content-Length HTTP header."}
	ErrMissingContentLength    = &Error{"MissingContentLength", http.StatusLengthRequired, "You must provide the Content-Length HTTP header."}
	ErrEntityTooLarge          = &Error{"EntityTooLarge", http.StatusBadRequest, "Your proposed upload exceeds the maximum allowed object size."}
	ErrEntityTooSmall          = &Error{"EntityTooSmall", http.StatusBadRequest, "Your proposed upload is smaller than the minimum allowed object size."}
	ErrMetadataTooLarge        = &Error{"MetadataTooLarge", http.StatusBadRequest, "Your metadata headers exceed the maximum allowed metadata size."}
	ErrMalformedXML            = &Error{"MalformedXML", http.StatusBadRequest, "The XML you provided was not well-formed or did not validate against our published schema."}
	ErrInvalidPart             = &Error{"InvalidPart", http.StatusBadRequest, "One or more of the specified parts could not be found. The part might not have been uploaded, or the specified entity tag might not have matched the part's entity tag."}
	ErrInvalidPartOrder        = &Error{"InvalidPartOrder", http.StatusBadRequest, "The list of parts was not in ascending order. The parts list must be specified in order by part number."}
	ErrNotImplemented          = &Error{"NotImplemented", http.StatusNotImplemented, "A header or query you provided implies functionality that is not implemented."}
	ErrInternal                = &Error{"InternalError", http.StatusInternalServerError, "We encountered an internal error. Please try again."}
	ErrServiceUnavailable      = &Error{"ServiceUnavailable", http.StatusServiceUnavailable, "The storage nodes could not complete the request. Please try again."}
)

// errorResponse is the S3 XML error document.
type errorResponse struct {
	XMLName   xml.Name `xml:"Error"`
	Code      string   `xml:"Code"`
	Message   string   `xml:"Message"`
	Resource  string   `xml:"Resource,omitempty"`
	RequestID string   `xml:"RequestId"`
}

// toError maps any error to the S3 error to send: *Error values are sent
// as they are, engine errors by their kind, everything else as
// InternalError.
func toError(err error) *Error {
	var e *Error
	switch {
	case errors.As(err, &e):
		return e
	case errors.Is(err, object.ErrNotExist):
		return ErrNoSuchKey
	case errors.Is(err, object.ErrIsDir), errors.Is(err, object.ErrNotDir), errors.Is(err, node.ErrNotDir):
		return ErrKeyConflict
	case errors.Is(err, node.ErrPath):
		return ErrInvalidArgument.with("%v", err)
	case errors.Is(err, object.ErrMetadataTooLarge):
		return ErrMetadataTooLarge.with("%v", err)
	case errors.Is(err, object.ErrTooLarge):
		return ErrEntityTooLarge.with("%v", err)
	case errors.Is(err, object.ErrQuorum), errors.Is(err, object.ErrUnrecoverable):
		return ErrServiceUnavailable.with("%v", err)
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return ErrInternal.with("request cancelled: %v", err)
	}
	return ErrInternal
}

// writeError sends err as an S3 XML error document. HEAD requests and
// 304 responses get the status only.
func writeError(w http.ResponseWriter, r *http.Request, reqID string, err *Error) {
	h := w.Header()
	for _, k := range []string{"Content-Length", "ETag", "Last-Modified", "Content-Range", "Accept-Ranges"} {
		if !(err.Status == http.StatusNotModified && (k == "ETag" || k == "Last-Modified")) &&
			!(err.Status == http.StatusRequestedRangeNotSatisfiable && k == "Content-Range") {
			h.Del(k)
		}
	}
	if err.Status == http.StatusNotModified || r.Method == http.MethodHead {
		w.WriteHeader(err.Status)
		return
	}
	body, _ := xml.Marshal(errorResponse{Code: err.Code, Message: err.Message, Resource: r.URL.Path, RequestID: reqID})
	h.Set("Content-Type", "application/xml")
	h.Set("Content-Length", fmt.Sprint(len(xml.Header)+len(body)))
	w.WriteHeader(err.Status)
	_, _ = w.Write([]byte(xml.Header))
	_, _ = w.Write(body)
}
