package jsonschema

import (
	"testing"

	"github.com/glovebox-dev/glovebox/internal/testkit"
)

func TestMain(m *testing.M) { testkit.Main(m) }
