package jobfile_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/corralhq/corral/cmd/corral/internal/jobfile"
)

const examples = "../../../../examples"

// TestExamplesRender loads every example, renders it in both formats and
// checks that the rendering reads back to the same specs.
func TestExamplesRender(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(examples, "*.jsonnet"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no examples found: %v", err)
	}
	want := map[string]int{"hello.jsonnet": 1, "web.jsonnet": 1, "batch.jsonnet": 1, "alloc.jsonnet": 2, "unschedulable.jsonnet": 1}
	for name := range want {
		if _, err := os.Stat(filepath.Join(examples, name)); err != nil {
			t.Errorf("example %s is missing", name)
		}
	}
	for _, path := range files {
		t.Run(filepath.Base(path), func(t *testing.T) {
			f, err := jobfile.Load(path, jobfile.Options{User: "alice"})
			if err != nil {
				t.Fatal(err)
			}
			if n, ok := want[filepath.Base(path)]; ok && len(f.Jobs) != n {
				t.Fatalf("%d jobs, want %d", len(f.Jobs), n)
			}
			for _, j := range f.Jobs {
				if j.User != "alice" {
					t.Errorf("job %s runs as %q, want the caller", j.Name, j.User)
				}
			}
			for _, format := range []string{"json", "yaml"} {
				out, err := f.Render(format)
				if err != nil {
					t.Fatal(err)
				}
				back, err := jobfile.Decode("rendered."+format, out, jobfile.Options{User: "alice"})
				if err != nil {
					t.Fatalf("rendered %s does not read back: %v\n%s", format, err, out)
				}
				if len(back.Jobs) != len(f.Jobs) || len(back.AllocSets) != len(f.AllocSets) {
					t.Fatalf("rendered %s: %d jobs %d alloc sets, want %d and %d", format, len(back.Jobs), len(back.AllocSets), len(f.Jobs), len(f.AllocSets))
				}
				for i := range f.Jobs {
					if !proto.Equal(back.Jobs[i], f.Jobs[i]) {
						t.Fatalf("rendered %s reads back as\n%v\nwant\n%v", format, back.Jobs[i], f.Jobs[i])
					}
				}
				for i := range f.AllocSets {
					a, b := f.AllocSets[i], back.AllocSets[i]
					if a.Name != b.Name || a.Count != b.Count || a.Priority != b.Priority || !proto.Equal(a.Resources, b.Resources) {
						t.Fatalf("alloc set %d reads back as %+v, want %+v", i, b, a)
					}
				}
			}
		})
	}
}

func TestAllocExampleIsABundle(t *testing.T) {
	f, err := jobfile.Load(filepath.Join(examples, "alloc.jsonnet"), jobfile.Options{User: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	if !f.Bundle || len(f.AllocSets) != 1 {
		t.Fatalf("bundle %v with %d alloc sets", f.Bundle, len(f.AllocSets))
	}
	set := f.AllocSets[0]
	for _, j := range f.Jobs {
		if j.AllocSet != set.Name {
			t.Fatalf("job %s runs in %q, want %q", j.Name, j.AllocSet, set.Name)
		}
	}
	// Both tasks of one alloc instance fit in it.
	var cpu, mem int64
	for _, j := range f.Jobs {
		cpu += j.Resources.CpuMilli
		mem += j.Resources.MemoryBytes
	}
	if cpu > set.Resources.CpuMilli || mem > set.Resources.MemoryBytes {
		t.Fatalf("a frontend and a logsaver need %dm and %d bytes; the alloc has %dm and %d", cpu, mem, set.Resources.CpuMilli, set.Resources.MemoryBytes)
	}
}

func problems(t *testing.T, err error) []jobfile.Problem {
	t.Helper()
	var fe *jobfile.Error
	if !errors.As(err, &fe) {
		t.Fatalf("error %v (%T) is not a *jobfile.Error", err, err)
	}
	return fe.Problems
}

func TestErrorsNameFileLineAndField(t *testing.T) {
	cases := []struct {
		name, src string
		want      []string // "line field" of each problem
	}{
		{"job.yaml", "name: web\ncount: 2\ncommand: /bin/true\nresources:\n  cpu: 1\n  memory: 0\n", []string{"6 resources.memory"}},
		{"job.json", "{\n  \"name\": \"web\",\n  \"count\": -1,\n  \"command\": \"x\",\n  \"resources\": {\"cpu\": 1, \"memory\": \"1Gi\"}\n}\n", []string{"3 count"}},
		{"job.jsonnet", "local m = 0;\n{\n  name: 'web',\n  count: 1,\n  command: 'x',\n  resources: {\n    cpu: 1,\n    memory: m,\n  },\n}\n", []string{"8 resources.memory"}},
		{"bundle.yaml", "jobs:\n- name: a\n  count: 1\n  command: x\n  resources: {cpu: 1, memory: 8Mi}\n- name: b\n  count: 1\n  command: x\n  resources: {cpu: 1, memory: 8Mi}\n  colour: red\n", []string{"10 jobs[1].colour"}},
		{"bundle.jsonnet", "{\n  alloc_sets: [{ name: 's', resources: { cpu: 1, memory: '8Mi' }, size: 3 }],\n  jobs: [{ name: 'a', count: 1, command: 'x', alloc_set: 'other', resources: { cpu: 1, memory: '8Mi' } }],\n}\n",
			[]string{"2 alloc_sets[0].size", "3 jobs[0].alloc_set"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := jobfile.Decode(c.name, []byte(c.src), jobfile.Options{User: "alice"})
			if err == nil {
				t.Fatal("no error")
			}
			ps := problems(t, err)
			var got []string
			for _, p := range ps {
				got = append(got, strings.TrimSpace(strings.Join([]string{itoa(p.Line), p.Field}, " ")))
			}
			if strings.Join(got, "; ") != strings.Join(c.want, "; ") {
				t.Fatalf("problems %q, want %q (%v)", got, c.want, err)
			}
			if !strings.HasPrefix(err.Error(), c.name+":") {
				t.Fatalf("error %q does not start with the file name", err)
			}
		})
	}
}

func itoa(i int) string {
	if i == 0 {
		return "0"
	}
	s := ""
	for ; i > 0; i /= 10 {
		s = string(rune('0'+i%10)) + s
	}
	return s
}

func TestJsonnetIsBounded(t *testing.T) {
	// Deep recursion hits the stack bound.
	_, err := jobfile.Decode("deep.jsonnet", []byte("local f(n) = if n == 0 then 0 else 1 + f(n - 1);\n{ name: 'x', count: f(100000) }"), jobfile.Options{User: "alice"})
	if err == nil || !strings.Contains(err.Error(), "deep.jsonnet") || !strings.Contains(strings.ToLower(err.Error()), "stack") {
		t.Fatalf("deep recursion: %v", err)
	}
	// A long computation hits the time limit.
	start := time.Now()
	_, err = jobfile.Decode("slow.jsonnet", []byte("{ name: std.toString(std.foldl(function(a, b) a + b, std.range(1, 100000000), 0)) }"),
		jobfile.Options{User: "alice", Timeout: 300 * time.Millisecond})
	if err == nil || !strings.Contains(err.Error(), "longer than") {
		t.Fatalf("slow evaluation: %v", err)
	}
	if time.Since(start) > 3*time.Second {
		t.Fatalf("the time limit did not stop the evaluation in time: %s", time.Since(start))
	}
	// A syntax error names the file and line.
	_, err = jobfile.Decode("broken.jsonnet", []byte("{\n  name: 'x',\n  count: ,\n}\n"), jobfile.Options{User: "alice"})
	if err == nil || !strings.Contains(err.Error(), "broken.jsonnet:3") {
		t.Fatalf("syntax error: %v", err)
	}
}

func TestExtensionChoosesTheFormat(t *testing.T) {
	if _, err := jobfile.Decode("job.txt", []byte("{}"), jobfile.Options{}); err == nil || !strings.Contains(err.Error(), ".jsonnet, .yaml") {
		t.Fatalf("unknown extension: %v", err)
	}
	// The user comes from the caller, never the file.
	_, err := jobfile.Decode("job.yaml", []byte("name: a\nuser: mallory\ncount: 1\ncommand: x\nresources: {cpu: 1, memory: 8Mi}\n"), jobfile.Options{User: "alice"})
	if err == nil || !strings.Contains(err.Error(), "job.yaml:2: user:") {
		t.Fatalf("user in the file: %v", err)
	}
	// std.extVar('user') is the caller.
	f, err := jobfile.Decode("job.jsonnet", []byte("{ name: std.extVar('user') + '-job', count: 1, command: 'x', resources: { cpu: 1, memory: '8Mi' } }"), jobfile.Options{User: "alice"})
	if err != nil || f.Jobs[0].Name != "alice-job" {
		t.Fatalf("extVar user: %v %v", f, err)
	}
}

// Brackets nested past MaxJsonnetDepth are refused before go-jsonnet's
// parser could overflow the stack on them; brackets in strings, text
// blocks and comments do not count.
func TestDeepJsonnetIsRefusedBeforeParsing(t *testing.T) {
	deep := strings.Repeat("[", 40000)
	_, err := jobfile.Decode("job.jsonnet", []byte(deep), jobfile.Options{User: "alice"})
	var je *jobfile.Error
	if !errors.As(err, &je) || !strings.Contains(err.Error(), "nested") {
		t.Fatalf("40,000 brackets: %v", err)
	}
	many := strings.Repeat("[", 1500)
	ok := "// " + many + "\n{name: 'web', count: 1, command: 'x', resources: {cpu: 1, memory: '1Gi'}, args: ['" + many + "', \"" + many + "\", |||\n  " + many + "\n|||]}"
	if _, err := jobfile.Decode("job.jsonnet", []byte(ok), jobfile.Options{User: "alice"}); err != nil {
		t.Fatalf("brackets in strings and comments: %v", err)
	}
	nested := strings.Repeat("[", 500) + strings.Repeat("]", 500)
	if _, err := jobfile.Decode("job.jsonnet", []byte("local x = "+nested+"; {name: 'web', count: 1, command: 'x', resources: {cpu: 1, memory: '1Gi'}}"), jobfile.Options{User: "alice"}); err != nil {
		t.Fatalf("500 deep: %v", err)
	}
}

// A key written twice is refused at its second line, not silently
// replaced by the last value.
func TestDuplicateKeysRefused(t *testing.T) {
	for name, src := range map[string]string{
		"dup.yaml": "name: web\ncount: 2\ncommand: /bin/true\nresources:\n  cpu: 1\n  memory: 1Gi\n\ncount: 200\n",
		"dup.json": "{\n  \"name\": \"web\",\n  \"count\": 2,\n  \"command\": \"x\",\n  \"resources\": {\"cpu\": 1, \"memory\": \"1Gi\"},\n\n  \"count\": 200\n}\n",
	} {
		_, err := jobfile.Decode(name, []byte(src), jobfile.Options{User: "alice"})
		if err == nil {
			t.Fatalf("%s: a duplicate key was accepted", name)
		}
		ps := problems(t, err)
		if len(ps) != 1 || ps[0].Line != 7 && name == "dup.json" || ps[0].Line != 8 && name == "dup.yaml" || ps[0].Field != "count" || !strings.Contains(ps[0].Reason, "first at line") {
			t.Fatalf("%s: %v", name, err)
		}
	}
	// Nested mappings too.
	_, err := jobfile.Decode("nested.yaml", []byte("name: web\ncount: 1\ncommand: x\nresources:\n  cpu: 1\n  cpu: 2\n  memory: 1Gi\n"), jobfile.Options{User: "alice"})
	if err == nil || !strings.Contains(err.Error(), "nested.yaml:6: cpu: written twice") {
		t.Fatalf("nested duplicate: %v", err)
	}
}

// Jsonnet imports resolve only under the job file's folder and --jpath
// folders, whether named absolutely, through .. or through a symlink.
func TestJsonnetImportsAreConfined(t *testing.T) {
	dir := t.TempDir()
	jobs := filepath.Join(dir, "jobs")
	lib := filepath.Join(dir, "lib")
	secret := filepath.Join(dir, "secret.txt")
	for _, d := range []string{jobs, lib, filepath.Join(jobs, "sub")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	write := func(p, s string) {
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(secret, "hunter2")
	write(filepath.Join(jobs, "sub", "common.libsonnet"), "{ cpu: 1 }")
	write(filepath.Join(lib, "shared.libsonnet"), "{ memory: '1Gi' }")
	if err := os.Symlink(secret, filepath.Join(jobs, "link.txt")); err != nil {
		t.Fatal(err)
	}
	job := func(imp string) []byte {
		return []byte("{ name: 'web', count: 1, command: 'x', args: [" + imp + "], resources: { cpu: 1, memory: '1Gi' } }")
	}
	path := filepath.Join(jobs, "web.jsonnet")
	for _, imp := range []string{
		"importstr '" + secret + "'",
		"importstr '../secret.txt'",
		"importstr 'link.txt'",
		"importstr '/etc/hostname'",
	} {
		f, err := jobfile.Decode(path, job(imp), jobfile.Options{User: "alice"})
		if err == nil {
			t.Fatalf("%s accepted: args %q", imp, f.Jobs[0].Args)
		}
		if !strings.Contains(err.Error(), "outside the job file's folder") && !strings.Contains(err.Error(), "no such file") {
			t.Fatalf("%s: %v", imp, err)
		}
		if strings.Contains(err.Error(), "hunter2") {
			t.Fatalf("%s: the error shows the file: %v", imp, err)
		}
	}
	// Under the job's folder, and under a --jpath folder, imports work.
	ok := "{ name: 'web', count: 1, command: 'x', resources: (import 'sub/common.libsonnet') + (import 'shared.libsonnet') }"
	if _, err := jobfile.Decode(path, []byte(ok), jobfile.Options{User: "alice"}); err == nil || !strings.Contains(err.Error(), "shared.libsonnet") {
		t.Fatalf("an import from a folder not given with --jpath: %v", err)
	}
	f, err := jobfile.Decode(path, []byte(ok), jobfile.Options{User: "alice", JPaths: []string{lib}})
	if err != nil {
		t.Fatal(err)
	}
	if r := f.Jobs[0].Resources; r.CpuMilli != 1000 || r.MemoryBytes != 1<<30 {
		t.Fatalf("resources %v", r)
	}
}
