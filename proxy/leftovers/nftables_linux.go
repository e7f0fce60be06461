package leftovers

import (
	"context"
	"errors"
	"fmt"

	"sigs.k8s.io/knftables"
)

// DeleteNFTables deletes the nftables mode's tables, if they exist.
func DeleteNFTables(ctx context.Context) error {
	var errs []error
	for _, family := range []knftables.Family{knftables.IPv4Family, knftables.IPv6Family} {
		nft, err := knftables.New(family, NFTablesTable)
		if err != nil {
			if family == knftables.IPv6Family {
				continue // no IPv6 nftables, so no table either
			}
			return fmt.Errorf("nftables: %w", err)
		}
		tx := nft.NewTransaction()
		tx.Add(&knftables.Table{})
		tx.Delete(&knftables.Table{})
		if err := nft.Run(ctx, tx); err != nil {
			errs = append(errs, fmt.Errorf("delete %s table %s: %w", family, NFTablesTable, err))
		}
	}
	return errors.Join(errs...)
}
