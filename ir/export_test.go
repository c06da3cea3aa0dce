package ir

import "fmt"

// CheckStage unifies src with the schema as LoadBytes does, and returns a
// function that runs only ir's own work on the unified value: decoding and
// every semantic pass. BenchmarkIRPasses measures it apart from CUE's.
func CheckStage(name string, src []byte) (func() (*Document, error), error) {
	sc, err := takeSchema()
	if err != nil {
		return nil, err
	}
	l := newLoader(name, sc)
	valid, err := l.unify(src)
	if err != nil {
		return nil, err
	}
	return func() (*Document, error) {
		l.errs = nil
		clear(l.cuePaths)
		return l.check(valid)
	}, nil
}

// UnifyStage runs only the CUE stage of LoadBytes on src: building it with
// the cached compiled schema, and validating. BenchmarkUnifyFloor measures
// it.
func UnifyStage(name string, src []byte) error {
	sc, err := takeSchema()
	if err != nil {
		return err
	}
	defer sc.release(len(src))
	valid, err := newLoader(name, sc).unify(src)
	if err != nil {
		return err
	}
	if !valid {
		return fmt.Errorf("%s is not valid", name)
	}
	return nil
}
