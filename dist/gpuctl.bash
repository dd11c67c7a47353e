# bash completion for gpuctl: commands, options, GPU ids, pool names and user names.
# Installed by `make install` as PREFIX/share/bash-completion/completions/gpuctl (where the
# bash-completion package looks, for /usr and /usr/local) and by the gpuctl Debian package; or
# `source` it from ~/.bashrc. Needs nothing but bash: the bash-completion package's helpers
# are not used.
#
# What it asks gpuctl, so it never goes stale: the commands from `gpuctl --help`, a command's
# options from `gpuctl COMMAND --help` (its option lines), the GPUs from
# `gpuctl list --query index,uuid` (indices and UUIDs, for options whose argument is IDS), and
# the pools from the configuration file's `[pool NAME]` headers (`--config FILE` on the line,
# else $GPUCTL_CONFIG, else /etc/gpuctl/gpuctl.conf; docs/config.md) plus `default`.

# _gpuctl_commands GPUCTL: the command names of `gpuctl --help`, one per line.
_gpuctl_commands()
{
	"$1" --help 2>/dev/null | awk '/^Commands:/ { on = 1; next } on && /^$/ { exit }
		on && /^  [a-z]/ { print $1 }'
}

# _gpuctl_options GPUCTL [COMMAND]: "OPTION METAVAR" per option line of the help (METAVAR
# empty for a flag), e.g. "--only IDS", "--verbose ".
_gpuctl_options()
{
	if [[ -n $2 ]]; then
		"$1" "$2" --help 2>/dev/null
	else
		"$1" --help 2>/dev/null
	fi | awk '/^  +-/ {
		# the option column: "-i, --id IDS", "--wait[=SECONDS]", "--share --mem SIZE"
		sub(/^ +/, ""); split($0, col, /   */); n = split(col[1], w, / +/); alias = ""
		for (i = 1; i <= n; i++) {
			if (w[i] !~ /^--?[A-Za-z]/) continue
			name = w[i]
			if (name ~ /,$/) { sub(/,$/, "", name); alias = alias " " name; continue }
			arg = (i < n && w[i + 1] ~ /^[A-Z]/) ? w[i + 1] : ""
			sub(/\[?=.*/, "", name); print name " " arg
			m = split(alias, a, " "); for (j = 1; j <= m; j++) print a[j] " " arg
			alias = ""
		}
	}'
}

# _gpuctl_gpus GPUCTL: the GPUs' indices and UUIDs.
_gpuctl_gpus()
{
	"$1" list --query index,uuid --format csv,noheader 2>/dev/null | tr -d ' ' | tr ',' '\n'
}

# _gpuctl_pools CONFIG: the pool names of the configuration file, and default.
_gpuctl_pools()
{
	echo default
	[[ -r $1 ]] && sed -n 's/^[[:space:]]*\[[[:space:]]*pool[[:space:]]\{1,\}\([A-Za-z0-9_.-]\{1,\}\)[[:space:]]*\].*/\1/p' "$1"
}

_gpuctl()
{
	local cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD - 1]}
	local prog=${COMP_WORDS[0]} cmd="" config=${GPUCTL_CONFIG:-/etc/gpuctl/gpuctl.conf}
	local i w
	COMPREPLY=()
	# the command: the first word that is no option nor the value of --config or --color
	for ((i = 1; i < COMP_CWORD; i++)); do
		w=${COMP_WORDS[i]}
		if [[ $w == --config ]]; then
			((i++))
			config=${COMP_WORDS[i]}
		elif [[ $w == --config=* ]]; then
			config=${w#--config=}
		elif [[ $w == --color ]]; then
			((i++)) # its value is no command
		elif [[ $w != -* ]]; then
			cmd=$w
			break
		fi
	done
	# run's job after "--": a command, then its own arguments (files)
	if [[ $cmd == run ]]; then
		local j
		for ((j = i + 1; j < COMP_CWORD; j++)); do
			if [[ ${COMP_WORDS[j]} == -- ]]; then
				if ((COMP_CWORD == j + 1)); then
					COMPREPLY=($(compgen -c -- "$cur"))
				else
					COMPREPLY=($(compgen -f -- "$cur"))
				fi
				return
			fi
		done
	fi
	# a value for the option before the cursor: --opt VALUE, or --opt=VALUE (three words when
	# COMP_WORDBREAKS has "=", as by default: --opt, =, VALUE)
	local opt=$prev
	if [[ $prev == = && $COMP_CWORD -ge 2 ]]; then
		opt=${COMP_WORDS[COMP_CWORD - 2]}
	elif [[ $cur == --*=* ]]; then
		opt=${cur%%=*}
		cur=${cur#*=}
	fi
	local metavar=""
	if [[ $opt == -* ]]; then
		metavar=$(_gpuctl_options "$prog" "$cmd" | awk -v o="$opt" '$1 == o { print $2; exit }')
	fi
	case $metavar in
	IDS)
		# a comma-separated list: complete its last element
		local head="" last=$cur
		[[ $cur == *,* ]] && head=${cur%,*}, && last=${cur##*,}
		COMPREPLY=($(compgen -P "$head" -W "$(_gpuctl_gpus "$prog")" -- "$last"))
		return
		;;
	NAME)
		[[ $opt == --pool ]] && COMPREPLY=($(compgen -W "$(_gpuctl_pools "$config")" -- "$cur"))
		return
		;;
	USER)
		# quota --user: a user name
		COMPREPLY=($(compgen -u -- "$cur"))
		return
		;;
	FILE | DIR | PATH)
		COMPREPLY=($(compgen -f -- "$cur"))
		return
		;;
	KEY)
		# report --by: its groupings
		[[ $opt == --by ]] && COMPREPLY=($(compgen -W "user group pool workload gpu day" -- "$cur"))
		return
		;;
	WHEN)
		COMPREPLY=($(compgen -W "auto always never" -- "$cur"))
		return
		;;
	?*)
		return # a number, a size, a format...: nothing to offer
		;;
	esac
	if [[ $cur == -* ]]; then
		COMPREPLY=($(compgen -W "$(_gpuctl_options "$prog" "$cmd" | awk '{ print $1 }')" -- "$cur"))
	elif [[ -z $cmd ]]; then
		COMPREPLY=($(compgen -W "$(_gpuctl_commands "$prog")" -- "$cur"))
	elif [[ $cmd == help && $COMP_CWORD -eq $((i + 1)) ]]; then
		COMPREPLY=($(compgen -W "$(_gpuctl_commands "$prog")" -- "$cur"))
	elif [[ $cmd == lease && $COMP_CWORD -eq $((i + 1)) ]]; then
		COMPREPLY=($(compgen -W "init" -- "$cur"))
	elif [[ $cmd == run ]]; then
		COMPREPLY=($(compgen -c -- "$cur")) # the job's command, without "--"
	fi
}
complete -F _gpuctl gpuctl
