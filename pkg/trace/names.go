package trace

// TaskNames interns the task names of block IO records: a few distinct
// ones repeat, and neither the recorder nor a reader may allocate per
// record. The zero value is ready to use.
type TaskNames struct {
	m    map[string]string
	last string // the name returned last: records of one task come in runs
}

// maxTaskNames bounds the table, since hostile input could name every
// record differently; past it a name is allocated each time.
const maxTaskNames = 4096

// Name returns b as a string, allocating once per distinct name.
func (t *TaskNames) Name(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	if string(b) == t.last {
		return t.last
	}
	if s, ok := t.m[string(b)]; ok {
		t.last = s
		return s
	}
	s := string(b)
	if t.m == nil {
		t.m = map[string]string{}
	}
	if len(t.m) < maxTaskNames {
		t.m[s] = s
	}
	t.last = s
	return s
}
