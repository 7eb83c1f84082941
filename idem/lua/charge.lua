-- charge: a read's budget charge (guard.Budgeter.Charge), taken under
-- TOKEN: {'V', verdict}, packed (charge in the prelude says the verdicts).
-- Only BK and BZ are named.
return PACK({'V', format('%d', charge())}, 2)
