package toolname_test

import (
	"fmt"

	"github.com/sharedos/toolshare/services/contract/toolname"
)

func ExampleValidate() {
	fmt.Println(toolname.Validate("files.read"))
	fmt.Println(toolname.Validate("files read"))
	// Output:
	// <nil>
	// name: violates ToolNameSchema: character U+0020 at byte 5 is not in [A-Za-z0-9_.-]
}

func ExampleValidateIdentifier() {
	fmt.Println(toolname.ValidateIdentifier("user:alice@example.com"))
	fmt.Println(toolname.ValidateIdentifierField("turnId", "turn 7"))
	// Output:
	// <nil>
	// turnId: violates IdentifierSchema: character U+0020 at byte 4 is not in [\x21-\x7E]
}

func ExampleParse() {
	q, _ := toolname.Parse("github.search")
	fmt.Printf("%q %q\n", q.Namespace, q.Local)
	q, _ = toolname.Parse("files_read")
	fmt.Printf("%q %q\n", q.Namespace, q.Local)
	// Output:
	// "github" "search"
	// "" "files_read"
}

func ExampleCollisionKey() {
	fmt.Println(toolname.CollisionKey("files.read"), toolname.CollisionKey("files-read"), toolname.CollisionKey("files_read"))
	c, found := toolname.FindCollision([]string{"files.read", "files_read"})
	fmt.Println(found, c)
	// Output:
	// files_read files_read files_read
	// true names "files.read" and "files_read" collide as "files_read" once a harness rewrites '.' and '-' to '_'
}
