-- refund: gives back what TOKEN took (guard.Budgeter.Refund), once.
-- Only BK and BZ are named.
giveback(TOKEN)
return PACK({'V', '0'}, 2)
