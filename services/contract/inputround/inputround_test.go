package inputround_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/sharedos/toolshare/services/contract/inputround"
)

func TestMethods(t *testing.T) {
	if !slices.IsSortedFunc(inputround.Methods, func(a, b inputround.Method) int { return strings.Compare(a.Name, b.Name) }) {
		t.Error("Methods are not sorted by name")
	}
	if got := inputround.Names(); !slices.Equal(got, []string{"elicitation/create", "roots/list", "sampling/createMessage"}) {
		t.Errorf("Names() = %v", got)
	}
	for _, n := range inputround.Names() {
		if !inputround.Known(n) {
			t.Errorf("Known(%q) = false", n)
		}
	}
	if inputround.Known("tools/call") || inputround.Known("") {
		t.Error("Known accepts a method that is no input request")
	}
}

func TestAnswerableAndCapabilities(t *testing.T) {
	for _, tc := range []struct {
		caps, names []string
	}{
		{nil, nil},
		{[]string{"sampling", "roots"}, []string{"roots/list", "sampling/createMessage"}},
		{[]string{"elicitation", "tasks", "experimental"}, []string{"elicitation/create"}},
		{[]string{"elicitation", "roots", "sampling"}, []string{"elicitation/create", "roots/list", "sampling/createMessage"}},
	} {
		if got := inputround.Answerable(tc.caps); !slices.Equal(got, tc.names) {
			t.Errorf("Answerable(%v) = %v, want %v", tc.caps, got, tc.names)
		}
		back := inputround.Capabilities(tc.names)
		want := slices.DeleteFunc(slices.Clone(tc.caps), func(c string) bool { return c == "tasks" || c == "experimental" })
		slices.Sort(want)
		if !slices.Equal(back, want) {
			t.Errorf("Capabilities(%v) = %v, want %v", tc.names, back, want)
		}
	}
	if got := inputround.Capabilities([]string{"tools/call"}); got != nil {
		t.Errorf("Capabilities of no input request = %v", got)
	}
}
