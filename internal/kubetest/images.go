package kubetest

import (
	"path"
	"strings"
	"sync"
)

// Image is what the kubelet knows of a container image: there is no
// container runtime, so an image is a map of in-image paths to host files
// (or folders) plus the entrypoint and default command an image config
// would carry.
type Image struct {
	// Files maps an absolute path inside the image to the host file or
	// folder standing for it, e.g. "/berth-agent" -> the built binary.
	// Paths in a container's command, args, env values and workingDir are
	// rewritten with it (see rewrite.go).
	Files map[string]string
	// Entrypoint and Cmd are used as a container runtime would: the pod's
	// command replaces Entrypoint (and drops Cmd), its args replace Cmd.
	Entrypoint, Cmd []string
}

// images is the kubelet's image store: registered images, images a test
// declared missing, and the two built in (pause, Kaniko).
type images struct {
	mu      sync.Mutex
	known   map[string]Image
	missing map[string]bool
	kaniko  string // substring naming Kaniko images
}

// imageKind says how a container's image runs.
type imageKind int

const (
	imagePlain   imageKind = iota // its command runs on the host
	imagePause                    // sleeps until killed
	imageKaniko                   // records the build and exits
	imageMissing                  // cannot be pulled
)

func (im *images) add(name string, img Image) {
	im.mu.Lock()
	defer im.mu.Unlock()
	im.known[name] = img
	delete(im.missing, name)
}

func (im *images) setMissing(name string) {
	im.mu.Lock()
	defer im.mu.Unlock()
	im.missing[name] = true
}

// resolve returns how name runs and, for a registered image, what it holds.
func (im *images) resolve(name string) (imageKind, Image) {
	im.mu.Lock()
	defer im.mu.Unlock()
	if im.missing[name] {
		return imageMissing, Image{}
	}
	if img, ok := im.known[name]; ok {
		return imagePlain, img
	}
	if strings.Contains(name, im.kaniko) {
		return imageKaniko, Image{}
	}
	if repo := imageRepo(name); path.Base(repo) == "pause" {
		return imagePause, Image{}
	}
	return imagePlain, Image{}
}

// imageRepo strips the tag and digest from an image reference.
func imageRepo(ref string) string {
	if i := strings.IndexByte(ref, '@'); i >= 0 {
		ref = ref[:i]
	}
	if i := strings.LastIndexByte(ref, ':'); i > strings.LastIndexByte(ref, '/') {
		ref = ref[:i]
	}
	return ref
}
