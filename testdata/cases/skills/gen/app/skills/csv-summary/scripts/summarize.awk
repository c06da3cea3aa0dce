BEGIN { FS = "," }
NR == 1 { for (i = 1; i <= NF; i++) name[i] = $i; n = NF; next }
{ for (i = 1; i <= n; i++) if ($i ~ /^-?[0-9.]+$/) { sum[i] += $i; cnt[i]++ } }
END { for (i = 1; i <= n; i++) if (cnt[i]) printf "%s: count %d, sum %g, mean %g\n", name[i], cnt[i], sum[i], sum[i] / cnt[i] }
