package policy

import (
	"context"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/fsnotify/fsnotify"
)

// WatchDebounce is how long Watch waits after the last change in Dirs
// before it reloads, so that an editor's or a deploy's burst of writes
// causes one reload.
const WatchDebounce = 200 * time.Millisecond

// Watch reloads the policy (see Reload) whenever a file under Options.Dirs
// changes, debounced by WatchDebounce. Reload failures keep the previous
// policy and are reported through the log and OnReload; Watch carries on.
// It returns nil when ctx ends, or an error if it cannot watch. With no
// Dirs (the embedded policy) there is nothing to watch and it just waits.
//
// Directories created later under Dirs are watched too. Names starting
// with "." are not watched, but events about them (such as a Kubernetes
// ConfigMap volume swapping its ..data link) still trigger a reload.
func (e *Engine) Watch(ctx context.Context) error {
	if len(e.dirs) == 0 {
		<-ctx.Done()
		return nil
	}
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return err
	}
	defer w.Close()
	for _, dir := range e.dirs {
		if err := watchTree(w, dir); err != nil {
			return err
		}
	}
	e.log.LogAttrs(ctx, slog.LevelInfo, "watching policy directories", slog.Any("dirs", e.dirs))

	timer := time.NewTimer(WatchDebounce)
	timer.Stop()
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case ev, ok := <-w.Events:
			if !ok {
				return nil
			}
			if ev.Op == fsnotify.Chmod {
				continue
			}
			if ev.Has(fsnotify.Create) && !hidden(ev.Name) {
				if fi, err := os.Lstat(ev.Name); err == nil && fi.IsDir() {
					// A new directory: watch it and what it already holds.
					if err := watchTree(w, ev.Name); err != nil {
						e.log.LogAttrs(ctx, slog.LevelWarn, "cannot watch new policy directory",
							slog.String("path", ev.Name), slog.String("error", err.Error()))
					}
				}
			}
			timer.Reset(WatchDebounce)
		case err, ok := <-w.Errors:
			if !ok {
				return nil
			}
			e.log.LogAttrs(ctx, slog.LevelWarn, "policy watch error", slog.String("error", err.Error()))
			// Events may have been lost: reload to be sure.
			timer.Reset(WatchDebounce)
		case <-timer.C:
			_ = e.Reload(ctx) // reported by Reload
		}
	}
}

// watchTree adds root and every directory below it that is not hidden. A
// root that is a file is left alone (its parent is not watched).
func watchTree(w *fsnotify.Watcher, root string) error {
	return filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if path != root {
				return nil // vanished meanwhile
			}
			return err
		}
		if !d.IsDir() {
			return nil
		}
		if path != root && hidden(path) {
			return filepath.SkipDir
		}
		return w.Add(path)
	})
}

func hidden(path string) bool {
	return strings.HasPrefix(filepath.Base(path), ".")
}
