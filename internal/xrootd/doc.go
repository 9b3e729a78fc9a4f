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
// The server is a data server (kXR_DataServer): it never redirects. The
// Client follows kXR_redirect when DialOptions.Redirects allows (see
// Client), so that it can be pointed at a redirector (an XRootD manager,
// xrootd + cmsd), and lists a directory there as xrdfs ls does
// (DirlistCluster). With
// a TLS configuration it offers TLS (kXR_haveTLS), and moves a client to
// it right after kXR_protocol when the client asks (roots://) or, with
// token authentication, whenever the client can (kXR_gotoTLS,
// kXR_tlsLogin), as xrootd does. Token authentication is XRootD's ztn
// protocol (auth.go): under TLS the login answer offers "&P=ztn,0:4096:"
// (and "&P=unix", the anonymous fallback, unless tokens are required),
// and the session waits for kXR_auth; PeerIdentity tells a FileSystem
// who the client is. Other security protocols (gsi, krb5, sss) are not
// offered, and request signing (kXR_sigver) is not supported. The
// Client speaks the same (roots:// URLs, DialOptions.Token or
// FindBearerToken). A kXR_sync that takes longer than
// Limits.WaitRespAfter is answered kXR_waitresp and then with kXR_attn
// kXR_asynresp, as xrootd answers the sync that ends a third-party copy
// (whose CGI a FileSystem gets with the open; package xrdtpc);
// ConfigReporter lets a FileSystem answer kXR_query config keys such as
// "tpc". kXR_bind binds a new connection to a logged-in (and, where
// required, authenticated) session as a data sub-stream, as xrdcp -S N
// asks: the session must be of this Server and its connection from the
// same host (and under TLS if the session is), an unknown session id is
// refused with kXR_NotAuthorized, and a session has at most
// MaxSubStreams sub-streams at a time (path ids 1 to 15; kXR_NoMemory
// beyond, as xrootd answers). A sub-stream takes only the data requests
// (kXR_read, kXR_pgread, kXR_readv, kXR_write, kXR_pgwrite, kXR_sync,
// kXR_ping) on its session's open files and answers them itself;
// anything else there (login, auth, another bind, open) is refused with
// kXR_InvalidRequest. A read or write that names a path id (pathid) is
// answered on that sub-stream, with its own stream id; path id 0 and
// kXR_AnyPath are the connection the request came on. Sub-streams close
// when their session ends, and Server.SubStreamBytes counts their bytes.
// kXR_writev, kXR_gpfile and kXR_chkpoint are not implemented and answer
// kXR_error kXR_Unsupported. kXR_fattr get, set and
// del by path are served by handlers that keep attributes (AttrKeeper),
// on an open file's handle by files that do (FileAttrKeeper), and lists
// by those that enumerate them (AttrEnumerator, FileAttrEnumerator); a
// *Refusal of such a handler fails the request with its message, where
// other errors are each attribute's status. Other handlers' requests
// answer kXR_Unsupported, a malformed request kXR_ArgInvalid. The Client
// gets, sets and deletes attributes too. One ecstore extension uses the
// protocol's own opening for implementation-defined queries, kXR_query
// kXR_Qopaquf, twice: on "DIR?ecstore.listattr=NAME" it lists a directory
// with one attribute of every entry (AttrLister; Client.ListAttr, and
// Client.ListAttrEach, which parses the answer part by part as its
// frames arrive), and on "PATH?ecstore.open=MAX" it opens a file for
// reading and answers a regular file of at most MAX bytes with its
// content, closed, instead of a handle (WholeOpener, Client.OpenWhole;
// the answer's first byte says which). A plain xrootd answers both
// kXR_Unsupported ("Unable to FSctl"). Every frame of an answer is progress for a watchdog of the
// request's context (package watchdog), stopped while the caller
// handles the frame. A pgwrite page
// that fails its CRC32C fails the whole request with kXR_ChkSumErr instead
// of asking the client to resend the page, because handlers may accept
// only sequential writes.
//
// # Behaviour of the real clients
//
// What XRootD 5.5 clients send and expect, as observed on the wire:
//
//   - The handshake and a kXR_protocol request (flags kXR_secreqs,
//     kXR_ableTLS, kXR_bifreqs; expect kXR_ExpLogin) arrive in one write.
//     xrootd answers with two frames on stream 0: the handshake answer
//     and an 8-byte kXR_protocol answer (kXR_isServer, kXR_suppgrw and kXR_supposc) with no
//     security requirements appended.
//   - kXR_login is answered with the bare 16-byte session id when no
//     authentication is required.
//   - xrdfs ls first sends kXR_locate for "*<path>" (kXR_prefname|
//     kXR_4dirlist|kXR_compress) and expects "Sw[::ip]:port" ("Sr..."
//     from an xrootd exporting the path read-only, which xrdfs locate
//     prints as "Server Read"), then kXR_dirlist. With kXR_dstat the listing starts with ".\n0 0 0 0\n";
//     entries are "name\nstat\n", the last one ends with a NUL instead of
//     the newline, and long listings come as kXR_oksofar parts that end on
//     entry boundaries. xrdfs ls -C sends kXR_dcksm (with the path's CGI,
//     such as "?cks.type=crc32c"); xrootd then follows each stat with
//     " [ adler32:0a1b2c3d ]", "none" for a checksum it has not stored
//     or a directory, and refuses an algorithm it does not keep with
//     kXR_ServerError "crc32c checksum not supported.". A kXR_dirlist of
//     a file fails with kXR_FSError ("...; not a directory").
//   - Stat text is "id size flags mtime ctime atime mode owner group".
//   - xrdcp uploads: kXR_stat of the target (kXR_NotFound is expected),
//     kXR_open with kXR_delete|kXR_open_updt|kXR_async|kXR_retstat and CGI
//     "oss.asize=<size>", then 8 MiB kXR_pgwrite requests on several
//     streams at once, then kXR_close. It does not set kXR_mkpath and
//     relies on the server creating missing parent directories.
//   - xrdcp downloads: kXR_open with kXR_async|kXR_retstat, 8 MiB kXR_pgread
//     requests in parallel, answered by xrootd in 2 MiB partial kXR_status
//     frames. XRD_CPUSEPGWRTRD=0 switches xrdcp to kXR_read/kXR_write.
//   - Page data travels as CRC32C then page, for pgread and pgwrite alike;
//     the kXR_status body CRC32C covers the bytes after it up to the end of
//     the info (for pgread and pgwrite, the 8-byte offset).
//   - Checksum and config queries end their argument with a NUL byte; the
//     checksum query may carry "?cks.type=adler32". xrootd answers checksum
//     queries asynchronously (kXR_waitresp, then kXR_attn kXR_asynresp);
//     this server answers at once. xrdcp prints adler32 without leading
//     zeros. Unknown config keys are echoed back.
//   - xrdcp -S N opens N more connections once logged in, each with the
//     handshake and kXR_protocol (expect kXR_ExpBind), then kXR_bind with
//     the session id of the main connection's login answer, and takes
//     the one-byte path id answered. Its kXR_read and kXR_pgread
//     requests, sent on the main connection, name a sub-stream in
//     read_args and expect their answer there; reads issued before the
//     binds complete name none. Its kXR_write and kXR_pgwrite requests
//     go on the main connection with pathid 0 and are answered there,
//     though XrdCl logs them as expecting their answer on a sub-stream:
//     only downloads move their data over the sub-streams.
//   - The Python bindings send kXR_read with an 8-byte read_args payload,
//     and open for writing with kXR_delete or kXR_new without
//     kXR_open_updt.
//
// # Hostile input
//
// Every length and count read from the wire is checked against a limit
// before anything is allocated from it (see Limits and DialOptions).
// Malformed requests whose stream id is known get kXR_error
// kXR_ArgInvalid and the connection keeps going; a frame that cannot be
// delimited closes the connection.
package xrootd
