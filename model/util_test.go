package model

import (
	"errors"
	"testing"

	"go.uber.org/goleak"
)

func errorsIs(err, target error) bool { return errors.Is(err, target) }

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
