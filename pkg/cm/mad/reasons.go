package mad

import "fmt"

// RejectReason is the reason code of a REJ (IBA 12.6.7.2, Table 109; the
// kernel's enum ib_cm_rej_reason).
type RejectReason uint16

// Reject reasons.
const (
	RejNoQP                      RejectReason = 1
	RejNoEEC                     RejectReason = 2
	RejNoResources               RejectReason = 3
	RejTimeout                   RejectReason = 4
	RejUnsupported               RejectReason = 5
	RejInvalidCommID             RejectReason = 6
	RejInvalidCommInstance       RejectReason = 7
	RejInvalidServiceID          RejectReason = 8
	RejInvalidTransportType      RejectReason = 9
	RejStaleConn                 RejectReason = 10
	RejRDCNotExist               RejectReason = 11
	RejInvalidGID                RejectReason = 12
	RejInvalidLID                RejectReason = 13
	RejInvalidSL                 RejectReason = 14
	RejInvalidTrafficClass       RejectReason = 15
	RejInvalidHopLimit           RejectReason = 16
	RejInvalidPacketRate         RejectReason = 17
	RejInvalidAltGID             RejectReason = 18
	RejInvalidAltLID             RejectReason = 19
	RejInvalidAltSL              RejectReason = 20
	RejInvalidAltTrafficClass    RejectReason = 21
	RejInvalidAltHopLimit        RejectReason = 22
	RejInvalidAltPacketRate      RejectReason = 23
	RejPortCMRedirect            RejectReason = 24
	RejPortRedirect              RejectReason = 25
	RejInvalidMTU                RejectReason = 26
	RejInsufficientRespResources RejectReason = 27
	RejConsumerDefined           RejectReason = 28
	RejInvalidRNRRetry           RejectReason = 29
	RejDuplicateLocalCommID      RejectReason = 30
	RejInvalidClassVersion       RejectReason = 31
	RejInvalidFlowLabel          RejectReason = 32
	RejInvalidAltFlowLabel       RejectReason = 33
	RejVendorOptionNotSupported  RejectReason = 35
)

var rejectNames = map[RejectReason]string{
	RejNoQP:                      "no QP",
	RejNoEEC:                     "no EEC",
	RejNoResources:               "no resources",
	RejTimeout:                   "timeout",
	RejUnsupported:               "unsupported request",
	RejInvalidCommID:             "invalid communication ID",
	RejInvalidCommInstance:       "invalid communication instance",
	RejInvalidServiceID:          "invalid service ID",
	RejInvalidTransportType:      "invalid transport service type",
	RejStaleConn:                 "stale connection",
	RejRDCNotExist:               "RDC does not exist",
	RejInvalidGID:                "invalid GID",
	RejInvalidLID:                "invalid LID",
	RejInvalidSL:                 "invalid SL",
	RejInvalidTrafficClass:       "invalid traffic class",
	RejInvalidHopLimit:           "invalid hop limit",
	RejInvalidPacketRate:         "invalid packet rate",
	RejInvalidAltGID:             "invalid alternate GID",
	RejInvalidAltLID:             "invalid alternate LID",
	RejInvalidAltSL:              "invalid alternate SL",
	RejInvalidAltTrafficClass:    "invalid alternate traffic class",
	RejInvalidAltHopLimit:        "invalid alternate hop limit",
	RejInvalidAltPacketRate:      "invalid alternate packet rate",
	RejPortCMRedirect:            "port and CM redirection",
	RejPortRedirect:              "port redirection not supported",
	RejInvalidMTU:                "invalid path MTU",
	RejInsufficientRespResources: "insufficient responder resources",
	RejConsumerDefined:           "consumer defined",
	RejInvalidRNRRetry:           "invalid RNR retry count",
	RejDuplicateLocalCommID:      "duplicate local communication ID",
	RejInvalidClassVersion:       "unsupported class version",
	RejInvalidFlowLabel:          "invalid flow label",
	RejInvalidAltFlowLabel:       "invalid alternate flow label",
	RejVendorOptionNotSupported:  "vendor option not supported",
}

func (r RejectReason) String() string {
	if s, ok := rejectNames[r]; ok {
		return s
	}
	return fmt.Sprintf("reject reason %d", uint16(r))
}

// APRStatus is the status of an APR (IBA 12.6.13, Table 117; the kernel's
// enum ib_cm_apr_status).
type APRStatus uint8

// APR statuses.
const (
	APRPathLoaded        APRStatus = 0
	APRInvalidCommID     APRStatus = 1
	APRUnsupported       APRStatus = 2
	APRRejected          APRStatus = 3
	APRRedirect          APRStatus = 4
	APRIsCurrent         APRStatus = 5
	APRInvalidQPN        APRStatus = 6
	APRInvalidLID        APRStatus = 7
	APRInvalidGID        APRStatus = 8
	APRInvalidFlowLabel  APRStatus = 9
	APRInvalidTClass     APRStatus = 10
	APRInvalidHopLimit   APRStatus = 11
	APRInvalidPacketRate APRStatus = 12
	APRInvalidSL         APRStatus = 13
)

// SIDRStatus is the status of a SIDR_REP (IBA 12.11.2, Table 120).
type SIDRStatus uint8

// SIDR_REP statuses.
const (
	SIDRValid               SIDRStatus = 0
	SIDRServiceNotSupported SIDRStatus = 1
	SIDRRejected            SIDRStatus = 2
	SIDRNoQP                SIDRStatus = 3
	SIDRRedirect            SIDRStatus = 4
	SIDRBadClassVersion     SIDRStatus = 5
)

var sidrStatusNames = [...]string{
	SIDRValid:               "valid",
	SIDRServiceNotSupported: "service ID not supported",
	SIDRRejected:            "rejected",
	SIDRNoQP:                "no QP",
	SIDRRedirect:            "redirect",
	SIDRBadClassVersion:     "unsupported class version",
}

func (s SIDRStatus) String() string {
	if int(s) < len(sidrStatusNames) {
		return sidrStatusNames[s]
	}
	return fmt.Sprintf("SIDR status %d", uint8(s))
}
