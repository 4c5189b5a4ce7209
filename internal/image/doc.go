// Package image owns the host's OCI image cache: it resolves image
// references the one way every runtime shares (Normalize), pulls images
// from registries with go-containerregistry (credentials from the
// operator's docker config or a namespace's, HTTPS unless the operator
// says otherwise, every manifest, config and layer checked against its
// digest, progress reported as it goes), and unpacks each layer once,
// by its digest, into a read-only directory shared by every image that
// has it. Layers are hostile input: unpack_linux.go says what is refused,
// neutralised and skipped. The cache is bounded by size and evicts the
// least recently used images no holder (a sandbox) pins.
//
// Mounting is not this package's: an Image lists its layer directories,
// lowest first, with the image's own uids and gids and overlayfs's
// whiteouts, for the local runtime to mount (idmapped, read-only, under
// a writable upper of the sandbox's own).
package image
