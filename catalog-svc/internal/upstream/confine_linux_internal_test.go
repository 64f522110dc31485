//go:build linux

package upstream

import (
	"os"
	"os/exec"
	"os/user"
	"slices"
	"testing"
)

// The places a server writes in: its HOME (from its environment, else the
// user's entry, as node's os.homedir() finds it) and its working directory
// — "/" never.
func TestWritablePlaces(t *testing.T) {
	u, err := user.Current()
	if err != nil {
		t.Fatal(err)
	}
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	home := t.TempDir()
	for _, c := range []struct {
		env  []string
		want string
	}{
		{[]string{"PATH=/usr/bin", "HOME=" + home}, resolve(home)},
		{[]string{"PATH=/usr/bin"}, resolve(u.HomeDir)},
	} {
		got := writablePlaces(&exec.Cmd{Env: c.env})
		if c.want != "/" && !slices.Contains(got, c.want) || !slices.Contains(got, resolve(wd)) || slices.Contains(got, "/") {
			t.Errorf("env %v: writable places %v, want %s and the working directory %s", c.env, got, c.want, wd)
		}
	}
	if got := writablePlaces(&exec.Cmd{Env: []string{"HOME=/"}, Dir: "/"}); len(got) != 0 {
		t.Errorf("HOME=/ in /: writable places %v, want none", got)
	}
}
