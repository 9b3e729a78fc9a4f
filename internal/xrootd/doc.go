// Package xrootd implements the XRootD root:// wire protocol: a codec for
// the handshake, requests and responses, a data server (Server) that
// serves any FileSystem, and a multiplexing client (Client).
//
// The protocol is defined by "The XRootD Protocol, Version 5.1.x"
// (https://xrootd.slac.stanford.edu/doc/dev55/XRdv511.htm) and, where the
// two differ, by the binary definitions in XProtocol.hh of XRootD 5.5.3,
// which the specification itself says supersede it. Section numbers in
// comments refer to that document. The real xrdcp, xrdfs and the Python
// XRootD bindings of XRootD 5.5 work unchanged against Server; Client
// talks to real xrootd data servers and to Server.
//
// # Scope
//
// The server is a data server (kXR_DataServer): it never redirects. Login
// is anonymous; no security protocol is offered, kXR_auth is refused and
// request signing (kXR_sigver) is not supported. TLS, kXR_bind sub-streams,
// kXR_fattr, kXR_writev, kXR_gpfile, kXR_chkpoint and third-party copy are
// not implemented and answer kXR_error kXR_Unsupported. A pgwrite page
// that fails its CRC32C fails the whole request with kXR_ChkSumErr instead
// of asking the client to resend the page, because handlers may accept
// only sequential writes.
//
// # Hostile input
//
// Every length and count read from the wire is checked against a limit
// before anything is allocated from it (see Limits and DialOptions).
// Malformed requests whose stream id is known get kXR_error
// kXR_ArgInvalid and the connection keeps going; a frame that cannot be
// delimited closes the connection.
package xrootd
