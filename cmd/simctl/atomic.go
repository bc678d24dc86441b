package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
)

// writeFileAtomic writes data to path so that path holds either its old
// contents or all of data, never a mix or a truncated file, even if the
// disk fills or the process dies: a temporary file in the same directory
// (a rename is atomic only within one file system), written, synced,
// renamed over path, and the directory synced so the rename itself
// survives a crash.
//
// A path that is a symbolic link is written through: the file it names
// is replaced and the link kept. A file replaced keeps its permission
// bits (a new one gets 0644). A path that is not a regular file (a FIFO,
// a device, a directory) is refused before anything is written. Errors
// name path, never the temporary file.
func writeFileAtomic(path string, data []byte) (err error) {
	target, mode, err := outputTarget(path)
	if err != nil {
		return err
	}
	dir := filepath.Dir(target)
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(target)+".tmp-*")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, pathErr(err))
	}
	name := tmp.Name()
	defer func() {
		if err != nil {
			_ = tmp.Close()
			_ = os.Remove(name)
		}
	}()
	if _, err = tmp.Write(data); err != nil {
		return fmt.Errorf("write %s: %w", path, pathErr(err))
	}
	if err = tmp.Sync(); err != nil {
		return fmt.Errorf("sync %s: %w", path, pathErr(err))
	}
	if err = tmp.Chmod(mode); err != nil {
		return fmt.Errorf("write %s: %w", path, pathErr(err))
	}
	if err = tmp.Close(); err != nil {
		return fmt.Errorf("write %s: %w", path, pathErr(err))
	}
	if err = os.Rename(name, target); err != nil {
		return fmt.Errorf("write %s: %w", path, pathErr(err))
	}
	syncDir(dir)
	return nil
}

// outputTarget is the file an output path names, after symbolic links,
// and the mode a file written there gets: an existing file's own
// permission bits, else 0644. Anything but a regular file is refused.
func outputTarget(path string) (string, fs.FileMode, error) {
	target := path
	if t, err := filepath.EvalSymlinks(path); err == nil {
		target = t
	} else if l, lerr := os.Readlink(path); lerr == nil {
		// A dangling link: write the file it names.
		if !filepath.IsAbs(l) {
			l = filepath.Join(filepath.Dir(path), l)
		}
		target = l
	}
	st, err := os.Stat(target)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return target, 0o644, nil
	case err != nil:
		return "", 0, fmt.Errorf("write %s: %w", path, pathErr(err))
	case !st.Mode().IsRegular():
		return "", 0, fmt.Errorf("write %s: %w (%s); want a path for a regular file", path, errNotRegular, st.Mode().Type())
	}
	return target, st.Mode().Perm(), nil
}

// pathErr is err without the path an *fs.PathError or *os.LinkError
// names (a temporary file's): the caller names the output instead.
func pathErr(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	var le *os.LinkError
	if errors.As(err, &le) {
		return le.Err
	}
	return err
}

// checkOutputs refuses an output path that is one of the inputs: the same
// file after links (os.SameFile: symbolic and hard links both), or the
// same path. outputs and inputs are paths; "" and "-" (standard input or
// output) are skipped. flag names the output's flag in the message.
func checkOutputs(flag string, outputs []string, inputs []string) error {
	for _, o := range outputs {
		if o == "" || o == "-" || o == stdinPath {
			continue
		}
		ost, oerr := os.Stat(o)
		for _, in := range inputs {
			if in == "" || in == "-" || in == stdinPath {
				continue
			}
			same := filepath.Clean(o) == filepath.Clean(in)
			if !same && oerr == nil {
				if ist, err := os.Stat(in); err == nil {
					same = os.SameFile(ost, ist)
				}
			}
			if same {
				return usagef("%s %s is the input %s: writing it would destroy what is read; name another file", flag, quoteName(o), quoteName(in))
			}
		}
	}
	return nil
}

// syncDir makes a rename in dir durable; where a directory cannot be
// synced (some file systems, Windows) the rename is still atomic.
func syncDir(dir string) {
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync()
		_ = d.Close()
	}
}

// dashOutputs resolves "-" among a command's output files (flags names
// them): it is standard output, as import -o - is, and what the command
// prints about its run goes to stderr instead, so the two do not mix. One
// output at most can be "-". It returns where the command's report goes.
func dashOutputs(flags string, stdout, stderr io.Writer, outputs ...string) (io.Writer, error) {
	n := 0
	for _, o := range outputs {
		if o == "-" {
			n++
		}
	}
	switch {
	case n > 1:
		return nil, usagef("%s %d of them are - (standard output), which takes one: name files for the others", flags, n)
	case n == 1:
		return stderr, nil
	}
	return stdout, nil
}

// writeOutput writes an output file (writeFileAtomic), or data to stdout
// when path is "-".
func writeOutput(stdout io.Writer, path string, data []byte) error {
	if path == "-" {
		_, err := stdout.Write(data)
		return err
	}
	return writeFileAtomic(path, data)
}
