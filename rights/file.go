package rights

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// DefaultMaxFileSize is the largest rights file [FileSource] reads when
// FileOptions.MaxSize is zero (16 MiB).
const DefaultMaxFileSize = 16 << 20

// fileRetryInterval is how often an invalid file whose size, time and
// identity have not changed is read again anyway (a change the stat
// signature cannot see, such as an edit within the file system's time
// granularity, is then noticed within this interval).
const fileRetryInterval = time.Second

// FileOptions configure [NewFile].
type FileOptions struct {
	// CheckInterval is the least time between two checks of the file on
	// disk. Zero (the default) checks on every lookup, which costs one
	// stat call; a positive interval lets an edit take up to that long
	// to be seen. Negative is refused.
	CheckInterval time.Duration
	// Logger receives one ERROR record each time the file becomes
	// invalid or unreadable (with the reason) and one INFO record each
	// time a changed file is loaded. Nil means slog.Default().
	Logger *slog.Logger
	// MaxSize is the largest file accepted, in bytes. Zero means
	// DefaultMaxFileSize; negative is refused.
	MaxSize int64
}

// FileSource is a [Source] backed by a YAML or JSON file that is read
// again when it changes, so that an edit takes effect on the next lookup.
// It is safe for concurrent use.
//
// # Format
//
// One YAML document (JSON is YAML too, so a JSON file in the same shape
// works) with a single key, tenants, mapping each tenant to its subjects
// and each subject to their rights:
//
//	tenants:
//	  acme:
//	    alice: {rights: [bookings.read, bookings.write]}
//	    bob:
//	      rights: [bookings.read]
//	      active: false
//	  globex: {}
//
// A subject's entry is a mapping with the optional keys rights (a list
// of strings; absent means none) and active (true or false; absent means
// true). Rights must be non-empty strings of at most MaxRightLength bytes
// without white space or control characters, at most MaxRights per
// subject; repeated rights are kept once. Tenant and subject names are
// taken as written (007 stays "007"). Unknown keys, a key given twice,
// a value of the wrong type (a right written as a number or a boolean:
// quote it), YAML tags, merge keys (<<) and more than one document are
// refused; anchors and aliases may be used to share a list. Errors name
// the place, for example
//
//	tenants.acme.alice.rihgts (line 3, column 13): unknown key "rihgts" (allowed: rights, active)
//
// A tenant absent from the file, or a subject absent from its tenant, is
// answered Live{Active: false}: every credential they created fails.
//
// # Reloading
//
// Before answering, the source compares the file's size, modification
// time, device and inode (one stat call, at most once per
// CheckInterval) with those of the content it holds and reads the file
// again when any differs. That covers editing in place, replacing the
// file by rename (how most tools write atomically), and symbolic link
// swaps such as Kubernetes ConfigMap volumes. The limit is the file
// system's time granularity: an in-place edit that keeps the size and
// lands within the same time stamp is not seen until the next change.
//
// There is no fallback to an older content: while the file is missing,
// unreadable, too large or invalid, every lookup returns an error
// wrapping ErrUnavailable and the reason is logged once at ERROR; the
// first valid content read afterwards is served again. An editor that
// truncates the file and then writes it may therefore make a lookup that
// falls between the two steps fail; writing to a temporary file and
// renaming it over the old one avoids that window.
type FileSource struct {
	path     string
	name     string
	interval time.Duration
	maxSize  int64
	log      *slog.Logger
	now      func() time.Time

	state     atomic.Pointer[fileState]
	nextCheck atomic.Int64 // UnixNano; used when interval > 0

	mu          sync.Mutex // serialises checks and loads; guards what follows
	sig         fileSig    // of the last content read, or of the failed attempt
	lastAttempt time.Time
	logged      string // the problem last logged, so it is logged once
}

// fileState is what lookups read: either the table and the signature of
// the file it was read from, or the error.
type fileState struct {
	tenants map[string]map[string]Live
	sig     fileSig // when err is nil: equal to FileSource.sig
	err     error
}

// fileSig is what tells one version of the file from another without
// reading it.
type fileSig struct {
	exists   bool
	size     int64
	mtime    int64
	dev, ino uint64
}

func sigOf(fi os.FileInfo) fileSig {
	dev, ino := fileIdentity(fi)
	return fileSig{exists: true, size: fi.Size(), mtime: fi.ModTime().UnixNano(), dev: dev, ino: ino}
}

// NewFile reads the rights file at path and returns a FileSource that
// serves it. It fails, naming the reason and the place in the file, when
// the file is missing, unreadable, larger than MaxSize or invalid.
func NewFile(path string, o FileOptions) (*FileSource, error) {
	if path == "" {
		return nil, errors.New("rights: file source: no path")
	}
	if o.CheckInterval < 0 {
		return nil, fmt.Errorf("rights: file source: negative check interval %s", o.CheckInterval)
	}
	if o.MaxSize < 0 {
		return nil, fmt.Errorf("rights: file source: negative maximum size %d", o.MaxSize)
	}
	f := &FileSource{
		path:     path,
		name:     "file " + path,
		interval: o.CheckInterval,
		maxSize:  o.MaxSize,
		log:      o.Logger,
		now:      time.Now,
	}
	if f.maxSize == 0 {
		f.maxSize = DefaultMaxFileSize
	}
	if f.log == nil {
		f.log = slog.Default()
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.lastAttempt = f.now()
	tenants, sig, err := f.read()
	if err != nil {
		return nil, fmt.Errorf("rights: file %s: %w", path, err)
	}
	f.sig = sig
	f.state.Store(&fileState{tenants: tenants, sig: sig})
	f.nextCheck.Store(f.lastAttempt.Add(f.interval).UnixNano())
	return f, nil
}

// String names the source in logs and errors: "file <path>".
func (f *FileSource) String() string { return f.name }

// Lookup returns what the file says about subject in tenant, after
// reading the file again if it changed (see Reloading on [FileSource]).
// An absent tenant or subject is Live{Active: false}. While the file is
// missing or invalid, the error wraps ErrUnavailable. The returned Rights
// are the caller's to keep.
func (f *FileSource) Lookup(ctx context.Context, tenant, subject string) (Live, error) {
	if err := ctx.Err(); err != nil {
		return Live{}, unavailable(f.name, "lookup abandoned", err)
	}
	f.refresh()
	st := f.state.Load()
	if st.err != nil {
		return Live{}, st.err
	}
	l, ok := st.tenants[tenant][subject]
	if !ok {
		return Live{}, nil
	}
	return l.clone(), nil
}

// refresh checks the file and reloads it when it changed.
//
// With a zero interval, every lookup stats the file first without the
// lock and returns at once when the content held is valid and was read
// from a file with the very signature just seen: exactly the case in
// which the locked check below would return without doing anything
// (f.sig equals the held state's sig whenever that state is not an
// error). The stat is as fresh as the locked one would be, so an edit
// finished before the lookup began is still seen by it; lookups no
// longer queue on the mutex behind each other's stat calls.
func (f *FileSource) refresh() {
	if f.interval > 0 && f.now().UnixNano() < f.nextCheck.Load() {
		return
	}
	if f.interval == 0 {
		if sig, err := statSig(f.path); err == nil {
			if st := f.state.Load(); st.err == nil && st.sig == sig {
				return
			}
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	now := f.now()
	if f.interval > 0 {
		if now.UnixNano() < f.nextCheck.Load() {
			return // another lookup checked meanwhile
		}
		f.nextCheck.Store(now.Add(f.interval).UnixNano())
	}
	fi, err := os.Stat(f.path)
	if err != nil {
		f.sig = fileSig{}
		f.fail(statReason(err))
		return
	}
	failing := f.state.Load().err != nil
	if sigOf(fi) == f.sig && (!failing || now.Sub(f.lastAttempt) < fileRetryInterval) {
		return
	}
	f.lastAttempt = now
	tenants, sig, err := f.read()
	f.sig = sig
	if err != nil {
		f.fail(err.Error())
		return
	}
	f.state.Store(&fileState{tenants: tenants, sig: sig})
	f.logged = ""
	subjects := 0
	for _, s := range tenants {
		subjects += len(s)
	}
	f.log.Info("rights file loaded", "path", f.path, "tenants", len(tenants), "subjects", subjects)
}

// fail makes lookups return why, and logs it unless it was the last
// problem logged.
func (f *FileSource) fail(why string) {
	f.state.Store(&fileState{err: unavailable(f.name, why, nil)})
	if why != f.logged {
		f.logged = why
		f.log.Error("rights file unusable; rights lookups fail until it is fixed", "path", f.path, "error", why)
	}
}

// read opens, checks and parses the file. The signature is taken from the
// open file before reading, so a change made while reading shows as a
// difference at the next check.
func (f *FileSource) read() (map[string]map[string]Live, fileSig, error) {
	fh, err := os.Open(f.path)
	if err != nil {
		return nil, fileSig{}, errors.New(statReason(err))
	}
	defer fh.Close()
	fi, err := fh.Stat()
	if err != nil {
		return nil, fileSig{}, errors.New(statReason(err))
	}
	sig := sigOf(fi)
	if !fi.Mode().IsRegular() {
		return nil, sig, errors.New("not a regular file")
	}
	if fi.Size() > f.maxSize {
		return nil, sig, fmt.Errorf("file of %d bytes is larger than %d", fi.Size(), f.maxSize)
	}
	data, err := io.ReadAll(io.LimitReader(fh, f.maxSize+1))
	if err != nil {
		return nil, sig, errors.New(statReason(err))
	}
	if int64(len(data)) > f.maxSize {
		return nil, sig, fmt.Errorf("file is larger than %d bytes", f.maxSize)
	}
	tenants, err := parseRightsFile(data)
	if err != nil {
		return nil, sig, err
	}
	return tenants, sig, nil
}

// statReason describes a file system error without repeating the path.
func statReason(err error) string {
	if errors.Is(err, fs.ErrNotExist) {
		return "file does not exist"
	}
	if errors.Is(err, fs.ErrPermission) {
		return "permission denied"
	}
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Op + ": " + pe.Err.Error()
	}
	return err.Error()
}
