package migrations_test

import "io/fs"

func fsGlob(f fs.FS, pattern string) (map[string]string, error) {
	names, err := fs.Glob(f, pattern)
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, n := range names {
		b, err := fs.ReadFile(f, n)
		if err != nil {
			return nil, err
		}
		out[n] = string(b)
	}
	return out, nil
}
