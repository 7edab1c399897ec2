package rdmacm

import (
	"errors"

	"github.com/uroce/uroce/verbs"
)

// errNoGSI: the verbs layer has no GSI QP yet.
var errNoGSI = errors.New("device has no GSI QP")

func openGSI(dev *verbs.Device) (transport, error) { return nil, errNoGSI }
