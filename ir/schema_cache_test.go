package ir

import "testing"

// TestSchemaCacheRetires checks that a cached compiled schema is reused
// until its context has loaded retainLimit bytes of source, and then
// dropped: CUE keeps every file built in a context alive with it.
func TestSchemaCacheRetires(t *testing.T) {
	// Empty the cache, so that this test sees only its own schemas.
	for len(freeSchemas) > 0 {
		<-freeSchemas
	}
	sc, err := takeSchema()
	if err != nil {
		t.Fatal(err)
	}
	sc.release(retainLimit / 2)
	again, err := takeSchema()
	if err != nil {
		t.Fatal(err)
	}
	if again != sc {
		t.Fatal("a schema that loaded half its limit was not reused")
	}
	again.release(retainLimit / 2)
	fresh, err := takeSchema()
	if err != nil {
		t.Fatal(err)
	}
	if fresh == sc {
		t.Fatal("a schema that loaded its limit was reused")
	}
	fresh.release(0)
}
