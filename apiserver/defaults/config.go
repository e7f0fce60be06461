package defaults

import "portal.dev/portal/apiserver/svcconfig"

// ServiceConfig is the cluster's Service configuration; see svcconfig.
type ServiceConfig = svcconfig.ServiceConfig

// PortRange is a contiguous port range; see svcconfig.
type PortRange = svcconfig.PortRange
