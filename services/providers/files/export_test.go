package files

import "io/fs"

// WalkWith makes p's search walk fsys.
func WalkWith(p *Provider, fsys fs.FS) { p.walk = fsys }
